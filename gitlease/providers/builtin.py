"""The built-in providers (docs/reference/providers.md).

Each provider reads the spellings that people and tools really produce (short references, web
URLs, API URLs) and folds only what the tracker itself treats as equal: letter case where the
tracker ignores it, leading zeros of numbers, trailing slashes, query strings and fragments. So
two agents that name one unit of work differently derive one resource, and distinct units never
share one. Every provider except ``path`` also accepts its own output, so ``key`` is idempotent.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar
from urllib.parse import parse_qs, urlsplit

from .._util import lazy
from ..errors import GitleaseError, UsageError
from ..model.refname import validate_resource

_MAX_DIGITS = 18


class _Refused(Exception):
    """Raised by a parser with the reason an input is refused; ``key`` adds what is accepted."""


class BuiltinProvider:
    """Shared behaviour: option checking and error messages that say what is accepted."""

    name = ""
    accepts = ""
    option_names: frozenset[str] = frozenset()

    def key(self, item: str, *, options: Mapping[str, str], cwd: Path) -> str:
        """The canonical resource of ``item``; USAGE saying what is accepted otherwise."""
        unknown = sorted(set(options) - self.option_names)
        if unknown:
            known = ", ".join(sorted(self.option_names)) or "none"
            raise UsageError(
                f"{self.name}: no option {unknown[0]!r} (options: {known}); "
                f"{self.name} accepts {self.accepts}"
            )
        try:
            return self.parse(item, options, cwd)
        except _Refused as exc:
            reason = f": {exc}" if str(exc) else ""
            raise UsageError(
                f"{self.name}: cannot read {item!r}{reason}; {self.name} accepts {self.accepts}"
            ) from None

    def parse(self, item: str, options: Mapping[str, str], cwd: Path) -> str:
        """The resource of ``item``; raises ``_Refused`` with the reason when it cannot be."""
        raise NotImplementedError


def _number(text: str, what: str = "number") -> int:
    """A positive decimal number; leading zeros are dropped so ``#042`` names issue 42."""
    significant = text.lstrip("0")
    if not (text.isascii() and text.isdigit()) or not 0 < len(significant) <= _MAX_DIGITS:
        raise _Refused(f"{what} {text!r} is not a positive integer of at most {_MAX_DIGITS} digits")
    return int(significant)


def _url(item: str, bare_hosts: frozenset[str] | None) -> tuple[str, list[str], str] | None:
    """Host, path segments and query of an http(s) URL; None if ``item`` is not written as one.

    A URL without a scheme is recognised when it starts with one of ``bare_hosts`` (any host
    when ``bare_hosts`` is None). One leading and one trailing slash are dropped; the fragment
    is ignored.
    """
    if "://" not in item:
        first = item.split("/", 1)[0].lower()
        if "/" not in item or (bare_hosts is not None and first not in bare_hosts):
            return None
        item = "https://" + item
    try:
        parts = urlsplit(item)
        host = parts.hostname
    except ValueError:
        raise _Refused("not a valid URL") from None
    if parts.scheme not in ("http", "https") or not host:
        raise _Refused("only http(s) URLs are understood")
    segments = parts.path.split("/")[1:]
    if segments and segments[-1] == "":
        segments.pop()
    return host, segments, parts.query


# --- github -------------------------------------------------------------------------------

_GH_OWNER = lazy(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}")
_GH_REPO = lazy(r"[A-Za-z0-9._-]{1,100}")
_GH_SHORT = lazy(r"([^/#]+)/([^/#]+)#([^#]+)")
_GH_WEB_HOSTS = frozenset({"github.com", "www.github.com"})
_GH_API_HOST = "api.github.com"
_GH_KINDS = frozenset({"issues", "pull", "pulls"})


class GitHub(BuiltinProvider):
    """Issues and pull requests share one number space per repository, so both map alike."""

    name = "github"
    accepts = (
        "OWNER/REPO#N, or an issue or pull request URL such as "
        "https://github.com/OWNER/REPO/issues/N or .../pull/N"
    )

    def parse(self, item: str, options: Mapping[str, str], cwd: Path) -> str:
        """See :class:`BuiltinProvider`; the forms GitHub accepts are in ``accepts``."""
        short = _GH_SHORT.fullmatch(item)
        if short:
            return self._resource(*short.groups())
        url = _url(item, _GH_WEB_HOSTS | {_GH_API_HOST})
        if url is None:
            segments = item.split("/")
            if len(segments) == 4 and segments[0] == "github":  # our own output
                return self._resource(*segments[1:])
            raise _Refused()
        host, segments, _ = url
        if host == _GH_API_HOST and segments[:1] == ["repos"]:
            segments = segments[1:]
        elif host not in _GH_WEB_HOSTS:
            raise _Refused(f"host {host!r} is not github.com")
        if len(segments) < 4 or segments[2] not in _GH_KINDS:
            raise _Refused("not an issue or pull request URL")
        return self._resource(segments[0], segments[1], segments[3])

    def _resource(self, owner: str, repo: str, number: str) -> str:
        if not _GH_OWNER.fullmatch(owner):
            raise _Refused(f"{owner!r} is not a GitHub owner")
        if not _GH_REPO.fullmatch(repo) or repo in (".", ".."):
            raise _Refused(f"{repo!r} is not a GitHub repository name")
        if repo.lower().endswith(".git"):
            raise _Refused(f"drop the '.git' from {repo!r}")
        return f"github/{owner.lower()}/{repo.lower()}/{_number(number)}"


# --- gitlab -------------------------------------------------------------------------------

_GL_SEGMENT = lazy(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_GL_SHORT = lazy(r"([^#!]+)([#!])([^#!]+)")
_GL_KINDS = {"issues": "issues", "work_items": "issues", "merge_requests": "merge_requests"}


class GitLab(BuiltinProvider):
    """Issues and merge requests have separate number spaces, so the kind is in the resource.
    Any host is taken for GitLab's (it is self-hosted as often as not): ``/-/`` tells its URLs."""

    name = "gitlab"
    accepts = (
        "GROUP/PROJECT#N (issue), GROUP/PROJECT!N (merge request), or a URL such as "
        "https://gitlab.com/GROUP/PROJECT/-/issues/N or .../-/merge_requests/N (any host)"
    )

    def parse(self, item: str, options: Mapping[str, str], cwd: Path) -> str:
        """See :class:`BuiltinProvider`; the forms GitLab accepts are in ``accepts``."""
        if "/-/" not in item and "://" not in item:
            short = _GL_SHORT.fullmatch(item)
            if short:
                path, sign, number = short.groups()
                kind = "issues" if sign == "#" else "merge_requests"
                return self._resource(path.split("/"), kind, number)
            segments = item.split("/")
            own = segments[0] == "gitlab" and segments[-2:-1] in (["issues"], ["merge_requests"])
            if own:  # our own output
                return self._resource(segments[1:-2], segments[-2], segments[-1])
            raise _Refused()
        url = _url(item, None)
        if url is None:
            raise _Refused()
        _, segments, _ = url
        if "-" not in segments:
            raise _Refused("a GitLab URL has '/-/' before the issue or merge request")
        dash = segments.index("-")
        rest = segments[dash + 1 :]
        if len(rest) < 2 or rest[0] not in _GL_KINDS:
            raise _Refused("not an issue or merge request URL")
        return self._resource(segments[:dash], _GL_KINDS[rest[0]], rest[1])

    def _resource(self, path: list[str], kind: str, number: str) -> str:
        if len(path) < 2:
            raise _Refused("a project path has a group and a project, e.g. group/project")
        for segment in path:
            low = segment.lower()
            if not _GL_SEGMENT.fullmatch(segment) or low.endswith((".git", ".atom")):
                raise _Refused(f"{segment!r} is not a GitLab group or project name")
        return f"gitlab/{'/'.join(path).lower()}/{kind}/{_number(number)}"


# --- jira and linear ----------------------------------------------------------------------

_JIRA_KEY = lazy(r"([A-Za-z][A-Za-z0-9_]+)-([0-9]+)")
_LINEAR_KEY = lazy(r"([A-Za-z][A-Za-z0-9]*)-([0-9]+)")


def _issue_key(pattern: re.Pattern[str], text: str) -> str:
    """``ABC-012`` and ``abc-12`` both name ``ABC-12``: these trackers ignore key case."""
    match = pattern.fullmatch(text)
    if not match:
        raise _Refused(f"{text!r} is not an issue key like ABC-12")
    return f"{match.group(1).upper()}-{_number(match.group(2))}"


class _KeyTracker(BuiltinProvider):
    """A tracker whose issues are named by keys like ``ABC-12``, given bare, as this
    provider's own output (``NAME/ABC-12``) or inside one of its URLs (:meth:`_key_in`)."""

    key_pattern: ClassVar[re.Pattern[str]]
    #: The hosts its URLs may name (None: any host).
    hosts: ClassVar[frozenset[str] | None] = None

    def parse(self, item: str, options: Mapping[str, str], cwd: Path) -> str:
        """See :class:`BuiltinProvider`; the forms this tracker accepts are in ``accepts``."""
        own = f"{self.name}/"
        if item.startswith(own) and item.count("/") == 1:  # our own output
            item = item[len(own) :]
        if "/" not in item:
            return own + _issue_key(self.key_pattern, item)
        url = _url(item, self.hosts)
        if url is None:
            raise _Refused()
        return own + _issue_key(self.key_pattern, self._key_in(*url))

    def _key_in(self, host: str, segments: list[str], query: str) -> str:
        """The issue key a URL of this tracker names (:class:`_Refused` if it names none)."""
        raise NotImplementedError


class Jira(_KeyTracker):
    """Any host: Jira runs on atlassian.net and on self-hosted servers alike."""

    name = "jira"
    accepts = "an issue key such as ABC-12, or a URL such as https://x.atlassian.net/browse/ABC-12"
    key_pattern = _JIRA_KEY

    def _key_in(self, host: str, segments: list[str], query: str) -> str:
        if len(segments) >= 2 and segments[-2] == "browse":
            return segments[-1]
        selected = parse_qs(query).get("selectedIssue", [])
        if len(selected) == 1:
            return selected[0]
        raise _Refused("the URL names no issue (expected .../browse/KEY-N)")


class Linear(_KeyTracker):
    """Linear issue URLs end in an editable title slug, which is ignored."""

    name = "linear"
    accepts = "an issue key such as ENG-42, or a URL such as https://linear.app/TEAM/issue/ENG-42"
    key_pattern = _LINEAR_KEY
    hosts = frozenset({"linear.app", "www.linear.app"})

    def _key_in(self, host: str, segments: list[str], query: str) -> str:
        if host not in ("linear.app", "www.linear.app"):
            raise _Refused(f"host {host!r} is not linear.app")
        if len(segments) < 3 or segments[1] != "issue":
            raise _Refused("not an issue URL")
        return segments[2]


# --- beads ----------------------------------------------------------------------------------

_BEADS_ID = lazy(r"[a-z0-9][a-z0-9_]*(?:-[a-z0-9_]+)+(?:\.[1-9][0-9]*)*")


class Beads(BuiltinProvider):
    """Beads generates lower-case ids (``prefix-hash``, children ``.N``), so case is folded."""

    name = "beads"
    accepts = "a beads id such as bd-a1b2, bd-a1b2.1 or myproj-x7k"

    def parse(self, item: str, options: Mapping[str, str], cwd: Path) -> str:
        """See :class:`BuiltinProvider`; the forms Beads accepts are in ``accepts``."""
        if item.startswith("beads/"):  # our own output
            item = item[len("beads/") :]
        low = item.lower()
        if not item.isascii() or not _BEADS_ID.fullmatch(low):
            raise _Refused()
        return "beads/" + low


# --- taskmaster -----------------------------------------------------------------------------

_TASK_ID = lazy(r"[0-9]+(?:\.[0-9]+)*")


class Taskmaster(BuiltinProvider):
    """Task ids are numbers per tag, so the tag is part of the resource."""

    name = "taskmaster"
    accepts = "a task id such as 3 or 3.2, with option tag=NAME (default master)"
    option_names = frozenset({"tag"})

    def parse(self, item: str, options: Mapping[str, str], cwd: Path) -> str:
        """See :class:`BuiltinProvider`; the forms Taskmaster accepts are in ``accepts``."""
        tag = options.get("tag")
        if item.startswith("taskmaster/"):  # our own output
            parts = item.split("/")
            if len(parts) != 3:
                raise _Refused()
            if tag is not None and tag != parts[1]:
                raise _Refused(f"its tag {parts[1]!r} is not the tag option {tag!r}")
            tag, item = parts[1], parts[2]
        tag = "master" if tag is None else tag
        if not tag or "/" in tag or any(ch.isspace() for ch in tag):
            raise _Refused(f"tag {tag!r} must be non-empty, without '/' or whitespace")
        if not _TASK_ID.fullmatch(item):
            raise _Refused()
        task = ".".join(str(_number(part, "task number")) for part in item.split("."))
        return f"taskmaster/{tag}/{task}"


# --- path -----------------------------------------------------------------------------------


class RepoPath(BuiltinProvider):
    """A file or directory as the repository names it, wherever the caller stands."""

    name = "path"
    accepts = "a path inside the current git working tree, relative or absolute (e.g. src/app.py)"

    def parse(self, item: str, options: Mapping[str, str], cwd: Path) -> str:
        """See :class:`BuiltinProvider`; the forms RepoPath accepts are in ``accepts``."""
        top, prefix = _worktree(cwd)
        if item.startswith("/"):
            parts = _below(_lexical(item.split("/")) or [], top)
        else:
            parts = _lexical(prefix.split("/") + item.split("/"), relative=True)
        if parts is None:
            raise _Refused("it is outside the repository")
        if not parts:
            raise _Refused("it is the repository root itself")
        return "path/" + "/".join(parts)


def _lexical(parts: list[str], *, relative: bool = False) -> list[str] | None:
    """Drop empty and ``.`` parts and apply ``..``; None if a relative path climbs out."""
    out: list[str] = []
    for part in parts:
        if part in ("", "."):
            continue
        if part != "..":
            out.append(part)
        elif out:
            out.pop()
        elif relative:
            return None
    return out


def _below(parts: list[str], top: str) -> list[str] | None:
    """The parts below ``top``; ancestors are compared with symlinks resolved (the root's only)."""
    real_top = os.path.realpath(top)
    for i in range(len(parts) + 1):
        if os.path.realpath("/" + "/".join(parts[:i])) == real_top:
            return parts[i:]
    return None


def _worktree(cwd: Path) -> tuple[str, str]:
    """The working tree's top directory and ``cwd``'s path inside it, as git sees them."""
    import subprocess

    command = ["git", "-C", os.fspath(cwd), "rev-parse", "--show-toplevel", "--show-prefix"]
    try:
        done = subprocess.run(command, capture_output=True, check=False)
    except FileNotFoundError:
        raise GitleaseError("the path provider needs git, which was not found") from None
    lines = os.fsdecode(done.stdout).split("\n")
    if done.returncode != 0 or len(lines) < 2 or not lines[0]:
        detail = os.fsdecode(done.stderr).strip().removeprefix("fatal: ")
        raise _Refused(f"{os.fspath(cwd)!r} is not inside a git working tree ({detail})")
    return lines[0], lines[1]


# --- raw ------------------------------------------------------------------------------------


class Raw(BuiltinProvider):
    """For callers that already hold a canonical name."""

    name = "raw"
    accepts = "any resource: non-empty, at most 512 UTF-8 bytes, no control characters"

    def parse(self, item: str, options: Mapping[str, str], cwd: Path) -> str:
        """See :class:`BuiltinProvider`; the forms Raw accepts are in ``accepts``."""
        try:
            return validate_resource(item)
        except UsageError as exc:
            raise _Refused(str(exc)) from None


BUILTINS: dict[str, BuiltinProvider] = {
    p.name: p
    for p in (GitHub(), GitLab(), Jira(), Linear(), Beads(), Taskmaster(), RepoPath(), Raw())
}
