"""The CLI's writer: one ``git update-ref --stdin`` transaction a write, blobs written as
loose objects from Python, and no pygit2 in the process (docs/design.md, two writers).

Each test makes git itself race or refuse, and checks that what the writer answered is what
the store holds: a ref moved by someone else is a lost compare-and-swap, a ref lock held a
moment is waited out, anything else git refused is a store error, and a writer killed while
git writes does not free the resource's guard before git is done."""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import ROOT, git, run_cli, store_git, store_path, wait_for

from gitlease.errors import CompareAndSwapFailed, CorruptRecordError, StoreError
from gitlease.gitio.gitread import UNREADABLE_OID
from gitlease.store import plumbing
from gitlease.store.location import open_store

REF = "refs/worklease/pl/1.lease"


def _one_shot(repo: Path):  # type: ignore[no-untyped-def]
    store = open_store(cwd=repo, one_shot=True)
    assert isinstance(store.writer, plumbing.PlumbingWriter)
    return store


def _blob(repo: Path, text: str) -> str:
    """A blob written into the store by git itself."""
    done = subprocess.run(
        ["git", f"--git-dir={store_path(repo)}", "hash-object", "-w", "--stdin"],
        input=text,
        text=True,
        capture_output=True,
        check=True,
    )
    return done.stdout.strip()


def test_no_cli_write_imports_pygit2(repo: Path) -> None:
    """pygit2's import cost more than the rest of a CLI write (docs/performance.md, 3)."""
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('PYGIT2', 'pygit2' in sys.modules, file=sys.stderr))\n"
        "sys.argv = ['gitlease', *sys.argv[1:]]\n"
        "from gitlease.cli import run\n"
        "run()\n"
    )
    for args in (
        ("acquire", "pl/1", "--no-bind"),
        ("heartbeat", "pl/1"),
        ("release", "pl/1"),
        ("bundle", "acquire", "pl/2", "pl/3", "--no-bind"),
    ):
        got = subprocess.run(
            [sys.executable, "-c", probe, *args], cwd=repo, capture_output=True, text=True
        )
        assert got.returncode == 0, (args, got.stderr)
        assert "PYGIT2 False" in got.stderr, (args, got.stderr)
    shown = run_cli("show", "pl/1", "--json", cwd=repo).json
    assert shown["state"] == "released" and shown["revision"] == 1, shown
    assert store_git("fsck", "--strict", cwd=repo).returncode == 0
    log = (store_path(repo) / "logs" / REF).read_text().splitlines()
    assert [line.split("\t")[1].split(":")[0] for line in log] == [
        "gitlease acquire",
        "gitlease heartbeat",
        "gitlease release",
    ], log


def test_a_ref_that_moved_is_a_lost_swap_and_keeps_what_git_wrote(repo: Path) -> None:
    store = _one_shot(repo)
    theirs = _blob(repo, "someone else's\n")
    store_git("update-ref", REF, theirs, cwd=repo)  # after this writer read it as absent
    with pytest.raises(CompareAndSwapFailed, match="changed while it was being written"):
        store.compare_and_swap(REF, None, b"mine\n", "test")
    assert store.read(REF).oid == theirs
    with pytest.raises(CompareAndSwapFailed):
        store.compare_and_swap(REF, "1" * 40, b"mine\n", "test")
    ours = store.compare_and_swap(REF, theirs, b"mine\n", "test")
    assert store.read(REF).oid == ours and store.read(REF).data == b"mine\n"


def test_a_stale_ref_lock_is_removed_and_a_live_one_waited_out(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(cwd=repo, one_shot=True)
    lock = store_path(repo) / (REF + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    old = time.time() - 60
    os.utime(lock, (old, old))  # left by a writer that is gone
    first = store.compare_and_swap(REF, None, b"one\n", "test")
    assert store.read(REF).oid == first and not lock.exists()

    # a live lock: the writer meets it, then the holder lets go
    met = threading.Event()
    real = store.clear_stale_lock

    def noted(ref: str, **kw: float) -> None:
        met.set()
        real(ref, **kw)

    store = open_store(cwd=repo, one_shot=True)
    monkeypatch.setattr(store, "clear_stale_lock", noted)
    lock.write_text("")
    done: list[str] = []
    writer = threading.Thread(
        target=lambda: done.append(store.compare_and_swap(REF, first, b"two\n", "test"))
    )
    writer.start()
    assert met.wait(60), "the writer never met the lock"
    assert store_git("rev-parse", REF, cwd=repo).stdout.strip() == first
    lock.unlink()
    writer.join(60)
    assert done and store.read(REF).oid == done[0]


def test_a_refusal_that_is_no_lock_is_a_store_error_at_once(repo: Path, tmp_path: Path) -> None:
    """git refuses a ref whose name is a folder of refs: not a lost swap (nothing moved), and
    not a lock to wait out."""
    store = _one_shot(repo)
    inner = _blob(repo, "in the way\n")
    store_git("update-ref", REF + "/inner", inner, cwd=repo)
    started = time.monotonic()
    with pytest.raises(StoreError, match="cannot update"):
        store.compare_and_swap(REF, None, b"mine\n", "test")
    assert time.monotonic() - started < 30  # (not 50 tries of a lock that is not there)
    assert store_git("rev-parse", REF + "/inner", cwd=repo).stdout.strip() == inner


def test_the_guard_outlives_a_writer_killed_while_git_writes(repo: Path, tmp_path: Path) -> None:
    """Killed while its ``git update-ref`` runs, a CLI acquire leaves git to finish: the
    guard must stay held until git is done (git holds it too), so that nobody judges the
    ref lock git holds as a dead writer's and removes it; and so must the reservation of an
    explicit receipt, or a second acquire with that path could take it meanwhile."""
    real = shutil.which("git")
    assert real
    bindir = tmp_path / "bin"
    bindir.mkdir()
    started, go = tmp_path / "started", tmp_path / "go"
    (bindir / "git").write_text(
        "#!/bin/sh\n"
        'case " $* " in *" update-ref "*)\n'
        f'  cat > "{tmp_path}/stdin"\n'  # (all the acquire sends: it has sent it)
        f'  echo $$ > "{started}.tmp" && mv "{started}.tmp" "{started}"\n'
        f'  while [ ! -e "{go}" ]; do sleep 0.01; done\n'
        f'  exec "{real}" "$@" < "{tmp_path}/stdin" ;;\n'
        "esac\n"
        f'exec "{real}" "$@"\n'
    )
    (bindir / "git").chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    receipt = tmp_path / "receipts" / "pl-1.json"  # (an explicit one: its reservation too)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gitlease",
            "acquire",
            "pl/1",
            "--no-bind",
            "--receipt",
            str(receipt),
        ],
        cwd=repo,
        env={**env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(started.exists, what="the acquire's update-ref")
        pid = int(started.read_text())
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        guard = open_store(cwd=repo).guard_path(REF)
        fds = [os.open(guard, os.O_RDWR), os.open(receipt, os.O_RDWR)]
        try:
            for fd in fds:  # the guard, and the receipt's reservation
                with pytest.raises(BlockingIOError):
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # git still holds it
            go.write_text("")
            wait_for(lambda: not Path(f"/proc/{pid}").exists(), what="git to finish")
            for fd in fds:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free once git is done
        finally:
            for fd in fds:
                os.close(fd)
    finally:
        go.write_text("")  # (a failed run leaves no wrapper waiting)
        proc.kill()
        proc.wait()
    shown = run_cli("show", "pl/1", "--json", cwd=repo).json
    assert shown["state"] == "active" and shown["revision"] == 1, "git's write landed"


def _failing_after(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, then: str = "") -> None:
    """A ``git`` first on PATH whose ``update-ref`` commits (the real one), runs ``then``, and
    exits 1: git failing after it wrote (a reflog line it could not write, say)."""
    env = _wrapped_git(
        tmp_path,
        f'  "$REAL" "$@" || exit $?\n  {then or ":"}\n'
        "  echo 'error: could not write the reflog' >&2; exit 1",
    )
    monkeypatch.setenv("PATH", env["PATH"])


def test_a_write_git_committed_before_it_failed_is_a_write_that_landed(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git's exit status is not the store: a write it committed is not a lost swap (which
    lands nothing), whatever it said after."""
    store = _one_shot(repo)
    _failing_after(tmp_path, monkeypatch)
    new = store.compare_and_swap(REF, None, b"mine\n", "test")
    assert store.read(REF).oid == new


def test_a_write_git_committed_in_part_is_a_store_error(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _one_shot(repo)
    other = "refs/worklease/pl/2.lease"
    git_dir = store_path(repo)
    # the second ref's update undone once git committed both: as if git stopped between them
    _failing_after(tmp_path, monkeypatch, f'"$REAL" --git-dir="{git_dir}" update-ref -d {other}')
    with pytest.raises(StoreError, match="wrote part of the update"):
        store.compare_and_swap_many([(REF, None, b"one\n"), (other, None, b"two\n")], "test")


def test_a_ref_seen_unreadable_is_never_written_over(repo: Path) -> None:
    """git's all-zero old value means "absent", and it is also the id a snapshot gives an
    unreadable ref: a write that expected such a ref is refused as corrupt, never sent to
    git as "create it" (which a ref git calls absent, behind a damaged line, would let pass)."""
    store = _one_shot(repo)
    loose = store_path(repo) / REF
    loose.parent.mkdir(parents=True, exist_ok=True)
    loose.write_text("not an object id\n")
    seen = store.read(REF)
    assert seen.oid == UNREADABLE_OID and seen.problem, seen
    with pytest.raises(CorruptRecordError, match="cannot be read"):
        store.compare_and_swap(REF, seen.oid, b"tombstone\n", "test")
    assert loose.read_text() == "not an object id\n"


def test_the_lock_and_the_prune_of_a_one_shot_store(repo: Path) -> None:
    store = _one_shot(repo)
    first = store.compare_and_swap(REF, None, b"one\n", "test")
    other = _blob(repo, "other\n")
    with store.writer.locked(REF):
        moved = store_git("update-ref", REF, other, first, cwd=repo, check=False)
        assert moved.returncode != 0 and "File exists" in moved.stderr
    assert not (store_path(repo) / (REF + ".lock")).exists()
    with pytest.raises(CompareAndSwapFailed, match="being pruned"):
        store.remove_compare_and_swap(REF, other)
    store_git("pack-refs", "--all", cwd=repo)  # a packed ref: git rewrites packed-refs
    store.remove_compare_and_swap(REF, first)
    assert store.read(REF).oid is None
    assert REF not in store_git("for-each-ref", cwd=repo).stdout


def test_the_stores_it_serves(tmp_path: Path) -> None:
    plain = tmp_path / "plain.git"
    git("init", "-q", "--bare", str(plain), cwd=tmp_path)
    assert plain.joinpath("config").exists() and plumbing.serves(plain)
    sha256 = tmp_path / "sha256.git"
    made = git("init", "-q", "--bare", "--object-format=sha256", str(sha256), cwd=tmp_path)
    assert made.returncode == 0 and not plumbing.serves(sha256)
    (plain / "reftable").mkdir()
    assert not plumbing.serves(plain)
    assert not plumbing.serves(tmp_path / "missing.git")


def _wrapped_git(tmp_path: Path, on_update_ref: str) -> dict[str, str]:
    """The environment of a CLI whose ``git`` runs ``on_update_ref`` (shell; ``$REAL`` is the
    real git, and it must run it) for an ``update-ref``, and is the real git otherwise."""
    real = shutil.which("git")
    assert real
    bindir = tmp_path / "wrapped-bin"
    bindir.mkdir()
    (bindir / "git").write_text(
        "#!/bin/sh\n"
        f'REAL="{real}"\n'
        f'case " $* " in *" update-ref "*)\n{on_update_ref}\n;;\nesac\n'
        'exec "$REAL" "$@"\n'
    )
    (bindir / "git").chmod(0o755)
    return {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}


def test_git_outlives_a_signal_to_the_commands_process_group(repo: Path, tmp_path: Path) -> None:
    """A Ctrl-C or a supervisor's ``killpg`` reaches every process of the command's group:
    git must not be among them, or it could stop between a bundle's two refs. It runs in a
    group of its own; the command defers the signal while the write lands, then undoes the
    claims and answers 143 (gitlease.claims.interrupts): a whole bundle, then none of it."""
    started, go = tmp_path / "started", tmp_path / "go"
    env = _wrapped_git(
        tmp_path,
        f'  echo $$ > "{started}.tmp" && mv "{started}.tmp" "{started}"\n'
        f'  while [ ! -e "{go}" ]; do sleep 0.01; done\n'
        '  exec "$REAL" "$@"',
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitlease", "bundle", "acquire", "pl/2", "pl/3", "--no-bind"],
        cwd=repo,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # (the command's own group, as a terminal's job is)
    )
    try:
        wait_for(started.exists, what="the bundle's update-ref")
        pid = int(started.read_text())
        assert os.getpgid(pid) != os.getpgid(proc.pid), "git shares the command's group"
        os.killpg(proc.pid, signal.SIGTERM)
        assert Path(f"/proc/{pid}").exists(), "the group's signal stopped git"
        go.write_text("")
        code = proc.wait(60)
    finally:
        go.write_text("")
        proc.kill()
        proc.wait()
    states = [run_cli("show", r, "--json", cwd=repo).json["state"] for r in ("pl/2", "pl/3")]
    assert code == 143 and states == ["released", "released"], (code, states)


def test_the_users_ref_lock_timeout_never_hangs_a_write_on_a_dead_writers_lock(
    repo: Path, tmp_path: Path
) -> None:
    """``core.filesRefLockTimeout = -1`` (git waits for ever on a ref lock) in the user's
    configuration would have git wait on a stale lock that gitlease removes itself."""
    lock = store_path(repo) / (REF + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    old = time.time() - 60
    os.utime(lock, (old, old))  # left by a writer that is gone
    mine = tmp_path / "user.gitconfig"
    mine.write_text(
        Path(os.environ["GIT_CONFIG_GLOBAL"]).read_text() + "[core]\n\tfilesRefLockTimeout = -1\n"
    )
    try:
        got = run_cli(
            "acquire", "pl/1", "--no-bind", cwd=repo, env={"GIT_CONFIG_GLOBAL": str(mine)}
        )
    finally:
        lock.unlink(missing_ok=True)  # (a git left waiting by a failed run then ends)
    assert got.code == 0, got  # (run_cli's 60 s limit: a hang fails the test)


def test_a_blob_write_killed_midway_leaves_nothing_git_calls_garbage(
    repo: Path, tmp_path: Path
) -> None:
    """A temporary object file left by a writer killed before its link is named as git's own
    (``tmp_obj_*``), which ``git gc`` removes; any other name is "garbage" to every gc and
    fsck for good."""
    git_dir = store_path(repo)
    ready = tmp_path / "ready"
    child = (
        "import os, sys, time\n"
        "from pathlib import Path\n"
        "from gitlease.gitio import objects\n"
        "def stuck(src, dst):\n"
        f"    Path({str(ready)!r}).write_text('')\n"
        "    while True: time.sleep(1)\n"
        "os.link = stuck\n"
        "objects.write_blob(Path(sys.argv[1]), b'record\\n', durable=False)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", child, str(git_dir)], env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    try:
        wait_for(ready.exists, what="the write between its temporary file and its link")
    finally:
        proc.kill()
        proc.wait()
    store_git("gc", "--quiet", "--prune=now", cwd=repo)
    counted = store_git("count-objects", "-v", cwd=repo).stdout
    assert "\ngarbage: 0\n" in counted, counted


def test_a_store_without_hard_links_is_still_written(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a file system without hard links (vfat, some FUSE and SMB mounts: ``link()``
    answers EPERM), an object is renamed into place, as git's own writer does."""
    store = _one_shot(repo)

    def no_links(src: object, dst: object, *a: object, **kw: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    oid = store.compare_and_swap(REF, None, b"mine\n", "test")
    assert store.read(REF).data == b"mine\n" and store.read(REF).oid == oid


def test_a_reflog_line_is_stamped_with_the_time_of_the_write(repo: Path) -> None:
    """Not with a ``GIT_COMMITTER_DATE`` the caller's environment carries (a rebase's, a
    script's): the retention pass judges a history's age by these lines."""
    got = run_cli(
        "acquire", "pl/1", "--no-bind", cwd=repo, env={"GIT_COMMITTER_DATE": "@86400 +0000"}
    )
    assert got.code == 0, got
    line = (store_path(repo) / "logs" / REF).read_text().splitlines()[-1]
    stamp = int(line.split("\t")[0].split(" ")[-2])
    assert abs(stamp - time.time()) < 3600, line


def test_following_a_remote_never_writes_through_a_symbolic_ref(repo: Path) -> None:
    """A mirror ref made symbolic reads as unreadable (all zeros, which git takes as "must
    not exist"): the mirror leaves it, and never creates the ref it names."""
    store = _one_shot(repo)
    writer = store.writer
    assert isinstance(writer, plumbing.PlumbingWriter)
    git_dir = store_path(repo)
    (git_dir / REF).parent.mkdir(parents=True, exist_ok=True)
    (git_dir / REF).write_text("ref: refs/worklease/elsewhere\n")
    assert store.read(REF).oid == UNREADABLE_OID
    writer.follow([(REF, UNREADABLE_OID, writer.write_blob(b"record\n"))], "follow")
    assert "refs/worklease/elsewhere" not in store_git("for-each-ref", cwd=repo).stdout
    assert (git_dir / REF).read_text() == "ref: refs/worklease/elsewhere\n"


def test_a_ref_packed_right_after_git_wrote_it_is_no_failed_acquire(
    repo: Path, tmp_path: Path
) -> None:
    """``git pack-refs --prune`` (a ``git gc``) between git's write and the syncs after it
    removes the ref's file and folder: what landed is still an acquire that landed."""
    env = _wrapped_git(
        tmp_path,
        '  "$REAL" "$@" || exit $?\n  exec "$REAL" --git-dir="$GIT_DIR" pack-refs --all --prune',
    )
    got = run_cli("acquire", "pl/1", "--no-bind", "--json", cwd=repo, env=env)
    shown = run_cli("show", "pl/1", "--json", cwd=repo).json
    assert got.code == 0 and shown["state"] == "active", (got, shown)


def test_a_cli_killed_between_two_writes_of_gits_input_lands_none_of_a_bundle(
    repo: Path, tmp_path: Path
) -> None:
    """git reads the transaction from a pipe, which the command fills a piece at a time; a
    command killed between two pieces (kill -9, the OOM killer) leaves git the lines before
    the cut, and git outlives it on purpose. The lines are one ``start`` ... ``commit``
    transaction, which an input that ends before ``commit`` aborts whole. (Modelled: the
    wrapper cuts the last line, kills the command, then gives git the rest.)"""
    done = tmp_path / "done"
    env = _wrapped_git(
        tmp_path,
        f"  sed '$d' > \"{tmp_path}/cut\"\n"
        "  kill -KILL $PPID\n"
        f'  "$REAL" "$@" < "{tmp_path}/cut"; echo $? > "{done}"; exit 0',
    )
    got = subprocess.run(
        [sys.executable, "-m", "gitlease", "bundle", "acquire", "pl/2", "pl/3", "--no-bind"],
        cwd=repo,
        env={**os.environ, **env},
        capture_output=True,
        timeout=60,
    )
    assert got.returncode == -signal.SIGKILL, got
    wait_for(done.exists, what="git, given the input before the cut")
    held = store_git("for-each-ref", "--format=%(refname)", "refs/worklease/", cwd=repo).stdout
    assert "pl/2" not in held and "pl/3" not in held, held


def test_an_interrupt_while_git_writes_is_acted_on_once_git_is_done(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C during ``subprocess.run``'s wait used to kill git within a quarter of a
    second (between two refs of a bundle, say): now it is recorded, git finishes, and then
    the interrupt is raised. (The wrapper signals this process, then takes a second to
    write: what a slow disk gives a killed git no time for.)"""
    store = _one_shot(repo)
    env = _wrapped_git(tmp_path, '  kill -INT $PPID\n  sleep 1\n  exec "$REAL" "$@"')
    monkeypatch.setenv("PATH", env["PATH"])
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            store.compare_and_swap_many([(REF, None, b"one\n"), (REF + "2", None, b"two\n")], "t")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert store.read(REF).data == b"one\n" and store.read(REF + "2").data == b"two\n"


def test_a_blob_a_gc_took_before_its_ref_landed_is_written_again(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``git gc`` (the daily retention pass, on a clock that runs ahead of the file times)
    can prune a blob written a moment ago, before the ref that names it lands: git then
    refuses the ref ("nonexistent object") and nothing landed. The blob is written again
    and the write goes through. (Modelled: the first update-ref finds its object gone.)"""
    store = _one_shot(repo)
    objects_dir = store_path(repo) / "objects"
    once = tmp_path / "pruned-once"
    given = tmp_path / "given"
    env = _wrapped_git(
        tmp_path,
        f'  cat > "{given}"\n'
        f'  if [ ! -e "{once}" ]; then touch "{once}"\n'
        f'    new=$(awk \'$1 == "update" {{print $3}}\' "{given}")\n'
        f'    rm "{objects_dir}/$(echo $new | cut -c1-2)/$(echo $new | cut -c3-)" || exit 99\n'
        "  fi\n"
        f'  exec "$REAL" "$@" < "{given}"',
    )
    monkeypatch.setenv("PATH", env["PATH"])
    oid = store.compare_and_swap(REF, None, b"fresh\n", "test")
    assert once.exists() and store.read(REF).oid == oid and store.read(REF).data == b"fresh\n"
