"""The refs under a prefix read from their files, for a small store: no ``git`` process.

``list``, ``free`` of many names and the board name the refs of the store before they read
the records. ``git for-each-ref`` does that in about 1.3 ms of its own and costs the Python
process ``subprocess`` (1.5 ms more to import), which is most of what ``list`` of a few claims
costs beyond ``show`` (docs/performance.md, section 2). Yet a store that gitlease alone
writes holds refs of one plain form: loose files of an object id and a newline under
``refs/worklease/``, with plain names, and a well-formed ``packed-refs`` after a ``git gc``.
Those are read here.

Anything else is left to git, which knows every rule of refs: :func:`ref_ids` answers None
for a name git might refuse or skip (a component starting with ``.``, ending with ``.lock``
or ``.``, ``..``, ``@{``, any character outside the plain set), a file that is not exactly an
id and a newline (a symbolic ref, a damaged file), a link, a ``packed-refs`` that is not
well formed or not sorted as it says, or holds a line git would refuse, a ``reftable/``
folder, a git directory that keeps its refs in another (``commondir``), or more refs than
:data:`WALK_LIMIT` (git's C walk is the faster one there). A folder or file of the refs this
user cannot read is STORE, not left to git: git skips such a folder without a word, and a
held claim in it would be listed as free. So what is answered is what ``git for-each-ref
--format='%(objectname) %(refname)'`` prints for the same files, sorted the same way; the
tests compare the two on stores made to differ (``tests/gitio/test_refwalk.py``).

Concurrent writers: a ref file is replaced by a rename (libgit2 and git write ``<ref>.lock``
first), so each file read holds an old or a new id, never a mix. The loose files are read
before ``packed-refs``: ``git pack-refs`` writes the new ``packed-refs`` before it deletes
the loose files it packed, so a loose file that vanished while the walk ran is found in the
``packed-refs`` read after it. As for git's listing, the refs are not read at one instant.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .._util import lazy
from . import gitread

#: A store with more refs than this is listed by git (its walk in C costs less per ref than
#: this one's open and read of each file: docs/performance.md, section 2).
WALK_LIMIT = 2000
#: A ``packed-refs`` line of a claim is 60 to 150 bytes: a larger file is left to git unread.
_PACKED_LINE_BYTES = 256
#: One component of a ref name this walk reads itself: plain characters, never git's special
#: ones, never a leading ``.``, a trailing ``.`` or ``.lock``, ``..`` or ``@{`` (checked below).
_COMPONENT = lazy(r"[A-Za-z0-9_%+=@-][A-Za-z0-9_%+=@.-]*")
_ID_SHA1 = lazy(rb"[0-9a-f]{40}\n")
_ID_SHA256 = lazy(rb"[0-9a-f]{64}\n")


def ref_ids(git_dir: Path, prefix: str) -> list[tuple[str, str]] | None:
    """``(ref, object id)`` of every ref under ``prefix`` (which ends with ``/``), sorted by
    name as git sorts them, or None when git must list them (see the module's text)."""
    if not prefix.startswith("refs/") or not prefix.endswith("/") or not _plain(prefix[:-1]):
        return None
    try:
        if os.path.lexists(git_dir / "reftable") or os.path.lexists(git_dir / "commondir"):
            return None
    except (OSError, ValueError):
        return None
    sha256 = gitread.sha256_store(git_dir)
    loose = _loose(git_dir, prefix, _ID_SHA256 if sha256 else _ID_SHA1)
    if loose is None:
        return None
    packed = gitread.packed_ids(git_dir, prefix, WALK_LIMIT * _PACKED_LINE_BYTES)
    if packed is None or not all(_plain(ref) for ref in packed):
        return None
    if len(packed) + len(loose) > WALK_LIMIT:
        return None
    packed.update(loose)  # (a loose ref stands over a packed line of the same name)
    return sorted(packed.items())


def _loose(git_dir: Path, prefix: str, id_line: re.Pattern[bytes]) -> dict[str, str] | None:
    """The loose refs under ``prefix``, or None at the first thing git must judge. The
    folders are listed first and the files read only then: a store with more than
    :data:`WALK_LIMIT` refs goes to git having read none of them."""
    files: list[tuple[str, str]] = []  # (ref, path)
    try:
        for folder, entries in gitread.ref_folders(git_dir, prefix):
            for entry in entries:
                if not _plain_component(entry.name):
                    return None
                if entry.is_file(follow_symlinks=False):
                    files.append((f"{folder}/{entry.name}", entry.path))
                elif not entry.is_dir(follow_symlinks=False):
                    return None  # (a link, a socket: git reads through links)
            if len(files) > WALK_LIMIT:
                return None
    except PermissionError as exc:
        raise gitread.unreadable_error(git_dir, str(exc.filename)) from None
    except OSError:
        return None
    found: dict[str, str] = {}
    for ref, path in files:
        try:
            with open(path, "rb") as f:
                data = f.read(72)
        except FileNotFoundError:
            continue  # (packed while walked: see the module's text)
        except PermissionError:
            raise gitread.unreadable_error(git_dir, ref) from None
        except OSError:
            return None
        if not id_line.fullmatch(data) or not data.strip(b"0\n"):
            return None  # (not an id and a newline, or the null id: git's to judge)
        found[ref] = data[:-1].decode("ascii")
    return found


def _plain(ref: str) -> bool:
    return all(_plain_component(part) for part in ref.split("/"))


def _plain_component(part: str) -> bool:
    """A component of a ref name that git reads plainly (see :data:`_COMPONENT`)."""
    if _COMPONENT.fullmatch(part) is None:
        return False
    return not (part.endswith((".", ".lock")) or ".." in part or "@{" in part or part == "@")
