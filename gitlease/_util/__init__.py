"""Small helpers every layer may use: files (one atomic write), text, processes, immutable
values, digests, and the test-only switches."""

from ..errors import TYPE_CHECKING as TYPE_CHECKING  # (defined there, the bottom layer)
