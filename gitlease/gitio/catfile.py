"""The one reader of many objects: loose ones from their files, the rest through one
long-lived ``git cat-file --batch`` process. No pygit2: the reads stay lean
(docs/performance.md).

Two ways of asking, one process:

* :meth:`BatchReader.read` asks for one object and waits for it: a record chain (``log``,
  ``verify``), where the next id to ask for is in the answer to the last.
* :meth:`BatchReader.objects` (and :meth:`BatchReader.blobs` over it) asks for many at
  once: each loose object is read from its file first (:mod:`gitlease.gitio.objects`, a
  third of what git takes), and every other id is written to git in one stream (by a
  thread when it is more than a pipe holds, so that neither side waits on a full pipe)
  while the answers are read as they come. Listings, ``read_many``, a whole pass's history.

An id that is not an object id is never sent to git (a forged ``previous`` must not become
a second request). When git falls out of step (an answer it should not give) or ends, the
process is stopped and the ids not answered yet are asked afresh one at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ..errors import StoreError
from .gitread import OID, git_env
from .objects import LooseObjects

if TYPE_CHECKING:
    import subprocess

#: What a pipe holds whatever its size (one page): written at once, it never blocks.
_PAGE = 4096
#: An object's type and bytes; None: there is no such object (or the id is none).
Found = tuple[str, bytes] | None
#: git answered out of step, or ended: the object cannot be read from this process.
_ODD = "odd"


class BatchReader:
    """One ``git cat-file --batch`` process (started on the first object git must give),
    and the store's loose objects (opened on the first read of many)."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self._proc: subprocess.Popen[bytes] | None = None
        self._loose: LooseObjects | None = None

    def read(self, oid: str) -> tuple[bytes | None, str | None]:
        """(bytes, None) for a blob, or (None, why not): one object, asked of git alone."""
        if not OID.fullmatch(oid):
            return None, _not_an_id(oid)
        proc = self._start()
        stdin, stdout = _pipes(proc)
        try:
            stdin.write(oid.encode("ascii") + b"\n")
            stdin.flush()
            header = stdout.readline()
        except OSError as exc:
            raise StoreError(f"cannot read the store {self.git_dir}: {exc}") from None
        if not header:
            self.close()
            raise StoreError(f"cannot read the store {self.git_dir}: git cat-file ended early")
        found = _answer(oid, header, stdout)
        if isinstance(found, str):
            self.close()  # out of step with git: start afresh next time
            return None, f"object {oid} cannot be read"
        return blob_answer(oid, found)

    def objects(self, oids: Iterable[str]) -> dict[str, Found]:
        """Each of ``oids``' type and bytes (None: missing, or not an object id), loose
        objects from their files, the others in one stream (see the module's text)."""
        out: dict[str, Found] = {}
        wanted: list[str] = []
        if self._loose is None:
            self._loose = LooseObjects(self.git_dir / "objects")
        for oid in dict.fromkeys(oids):
            if not OID.fullmatch(oid):
                out[oid] = None
                continue
            loose = self._loose.read(oid)
            if loose is None:
                wanted.append(oid)
            else:
                out[oid] = loose
        done = self._stream(wanted, out) if wanted else 0
        for oid in wanted[done:]:  # (after git fell out of step: afresh, one at a time)
            out[oid] = self._one(oid)
        return out

    def blobs(self, oids: Iterable[str]) -> dict[str, tuple[bytes | None, str | None]]:
        """What :meth:`read` gives for each of ``oids``, read as :meth:`objects` reads."""
        oids = list(oids)
        found = self.objects(oids)
        out: dict[str, tuple[bytes | None, str | None]] = {}
        for oid in dict.fromkeys(oids):
            got = found[oid]
            out[oid] = (None, _not_an_id(oid)) if not OID.fullmatch(oid) else blob_answer(oid, got)
        return out

    def _stream(self, wanted: list[str], out: dict[str, Found]) -> int:
        """Ask git for every one of ``wanted`` at once; how many were answered in step."""
        proc = self._start()
        stdin, stdout = _pipes(proc)
        asked = b"".join(oid.encode("ascii") + b"\n" for oid in wanted)

        def feed() -> None:
            with suppress(OSError, ValueError):  # git ended (it was stopped out of step)
                stdin.write(asked)
                stdin.flush()

        # (a pipe holds at least a page: so little is written at once, without a thread)
        feeder = threading.Thread(target=feed, name="gitlease-cat-file-feed", daemon=True)
        if len(asked) <= _PAGE:
            feed()
        else:
            feeder.start()
        done = 0
        try:
            for oid in wanted:
                found = _answer(oid, stdout.readline(), stdout)
                if isinstance(found, str):
                    break
                out[oid] = found
                done += 1
        except OSError as exc:
            raise StoreError(f"cannot read the store {self.git_dir}: {exc}") from None
        finally:
            if done < len(wanted):  # out of step, or git ended: stop it before the feeder
                with suppress(OSError):
                    proc.kill()
            if feeder.ident is not None:
                feeder.join()
            if done < len(wanted):
                self.close()
        return done

    def _one(self, oid: str) -> Found:
        """One object's type and bytes, asked alone; STORE when git cannot give it."""
        proc = self._start()
        stdin, stdout = _pipes(proc)
        try:
            stdin.write(oid.encode("ascii") + b"\n")
            stdin.flush()
            found = _answer(oid, stdout.readline(), stdout)
        except OSError as exc:
            self.close()
            raise StoreError(f"cannot read the store {self.git_dir}: {exc}") from None
        if isinstance(found, str):
            self.close()
            raise StoreError(f"cannot read the store {self.git_dir}: cannot read object {oid}")
        return found

    def _start(self) -> subprocess.Popen[bytes]:
        import subprocess  # (a read loads subprocess only when it runs git: 1.5-2 ms a process)

        if self._proc is None:
            try:
                self._proc = subprocess.Popen(
                    ["git", "cat-file", "--batch"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    env=git_env(self.git_dir),
                )
            except OSError as exc:
                raise StoreError(f"cannot run git: {exc}") from None
        return self._proc

    def close(self) -> None:
        """End the process (it ends by itself when its input closes) and let go of the
        object directory."""
        if self._loose is not None:
            self._loose.close()
            self._loose = None
        proc, self._proc = self._proc, None
        if proc is None:
            return
        stdin, stdout = _pipes(proc)
        with suppress(OSError):
            stdin.close()
        with suppress(OSError):
            stdout.close()
        import subprocess

        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def blob_answer(oid: str, found: Found) -> tuple[bytes | None, str | None]:
    """``(bytes, None)`` for a blob, else ``(None, why not)``, as :meth:`BatchReader.read`."""
    if found is None:
        return None, f"object {oid} is missing"
    kind, body = found
    if kind != "blob":
        return None, f"object {oid} is a {kind}, not a blob"
    return body, None


def _not_an_id(oid: str) -> str:
    return f"{oid[:80]!r} is not an object id"


def _pipes(proc: subprocess.Popen[bytes]) -> tuple[IO[bytes], IO[bytes]]:
    assert proc.stdin is not None and proc.stdout is not None  # made with PIPE
    return proc.stdin, proc.stdout


def _answer(oid: str, header: bytes, stdout: IO[bytes]) -> Found | str:
    """git's answer for ``oid`` (its ``header`` line read already, the body then read):
    the object, None when git has none, or :data:`_ODD` when git ended or is out of step."""
    parts = header.split()
    name = oid.encode("ascii")
    if len(parts) == 2 and parts[1] == b"missing" and parts[0] == name:
        return None
    if len(parts) != 3 or not parts[2].isdigit() or parts[0] != name:
        return _ODD
    size = int(parts[2])
    body = stdout.read(size + 1)
    if len(body) != size + 1:
        return _ODD
    return parts[1].decode("ascii", "replace"), body[:size]
