"""What a bearer token looks like, for a program that must never pass one on.

A claim's token is its receipt's secret: it is in no record, no JSON document and no
message. A program that relays gitlease's answers elsewhere (the MCP server hands them to a
model) withholds any text holding :data:`TOKEN_PREFIX`; :func:`looks_like_token` is the
stricter test free text for a new record must pass.
"""

from __future__ import annotations

from ..model.fields import looks_like_token
from ..model.record import TOKEN_PREFIX

__all__ = ["TOKEN_PREFIX", "looks_like_token"]
