"""One long-lived ``git cat-file --batch`` process, for reading many blobs in turn: a record
chain (``log``, ``verify``, the retention pass), where the next id to ask for is often in the
answer to the last. No pygit2: the reads stay lean (docs/performance.md).
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path
from typing import IO

from ..errors import StoreError
from .gitread import OID, git_env

#: What a pipe holds whatever its size (one page): written at once, it never blocks.
_PAGE = 4096


class BatchReader:
    """One ``git cat-file --batch`` process, fed one object id at a time: the next id to ask
    for is often in the answer to the last (a record names its predecessor)."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self._proc: subprocess.Popen[bytes] | None = None

    def read(self, oid: str) -> tuple[bytes | None, str | None]:
        """(bytes, None) for a blob, or (None, why not)."""
        if not OID.fullmatch(oid):  # a forged "previous" must not become a second request
            return None, f"{oid[:80]!r} is not an object id"
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
        parts = header.split()
        if len(parts) == 2 and parts[1] == b"missing":
            return None, f"object {oid} is missing"
        if len(parts) != 3 or not parts[2].isdigit():
            self.close()  # out of step with git: start afresh next time
            return None, f"object {oid} cannot be read"
        size = int(parts[2])
        body = stdout.read(size + 1)
        if len(body) != size + 1:
            self.close()
            return None, f"object {oid} cannot be read"
        kind = parts[1].decode("ascii", "replace")
        if kind != "blob":
            return None, f"object {oid} is a {kind}, not a blob"
        return body[:size], None

    def read_many(self, oids: list[str]) -> dict[str, tuple[str | None, bytes]]:
        """Each object's type (None: missing, or not an object id) and bytes, asked a few at
        a time (so neither pipe fills while the other waits)."""
        out: dict[str, tuple[str | None, bytes]] = {}
        asked = [oid for oid in dict.fromkeys(oids) if OID.fullmatch(oid)]
        for oid in oids:
            out.setdefault(oid, (None, b""))
        for start in range(0, len(asked), 64):
            part = asked[start : start + 64]
            proc = self._start()
            stdin, stdout = _pipes(proc)
            try:
                stdin.write("".join(oid + "\n" for oid in part).encode("ascii"))
                stdin.flush()
                for oid in part:
                    header = stdout.readline()
                    parts = header.split()
                    if len(parts) == 2 and parts[1] == b"missing":
                        continue
                    if len(parts) != 3 or not parts[2].isdigit():
                        raise OSError(f"git cat-file answered {header[:80]!r}")
                    size = int(parts[2])
                    body = stdout.read(size + 1)
                    if len(body) != size + 1:
                        raise OSError("git cat-file ended early")
                    out[oid] = (parts[1].decode("ascii", "replace"), body[:size])
            except OSError as exc:
                self.close()
                raise StoreError(f"cannot read the store {self.git_dir}: {exc}") from None
        return out

    def read_answers(self, oids: Iterable[str]) -> dict[str, tuple[bytes | None, str | None]]:
        """What :meth:`read` gives for each of ``oids``, read in one stream: every id is
        written to git at once (by a thread, so that neither side waits on a full pipe) and
        the answers read as they come, so the many blobs of a whole pass cost no round trip
        each (docs/performance.md, ``verify``)."""
        out: dict[str, tuple[bytes | None, str | None]] = {}
        wanted = []
        for oid in dict.fromkeys(oids):
            if OID.fullmatch(oid):
                wanted.append(oid)
            else:
                out[oid] = (None, f"{oid[:80]!r} is not an object id")
        if not wanted:
            return out
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
                answer = _answer(oid, stdout)
                if answer is None:
                    break
                out[oid] = answer
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
        for oid in wanted[done:]:  # (after git fell out of step: afresh, one at a time)
            out[oid] = self.read(oid)
        return out

    def _start(self) -> subprocess.Popen[bytes]:
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
        """End the process (it ends by itself when its input closes)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        stdin, stdout = _pipes(proc)
        with suppress(OSError):
            stdin.close()
        with suppress(OSError):
            stdout.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _pipes(proc: subprocess.Popen[bytes]) -> tuple[IO[bytes], IO[bytes]]:
    assert proc.stdin is not None and proc.stdout is not None  # made with PIPE
    return proc.stdin, proc.stdout


def _answer(oid: str, stdout: IO[bytes]) -> tuple[bytes | None, str | None] | None:
    """git's answer for ``oid``, asked already; None when git ended or is out of step."""
    header = stdout.readline()
    parts = header.split()
    if len(parts) == 2 and parts[1] == b"missing" and parts[0] == oid.encode("ascii"):
        return None, f"object {oid} is missing"
    if len(parts) != 3 or not parts[2].isdigit() or parts[0] != oid.encode("ascii"):
        return None
    size = int(parts[2])
    body = stdout.read(size + 1)
    if len(body) != size + 1:
        return None
    kind = parts[1].decode("ascii", "replace")
    if kind != "blob":
        return None, f"object {oid} is a {kind}, not a blob"
    return body[:size], None
