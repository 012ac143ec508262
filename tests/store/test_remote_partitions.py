"""A release cut off by a partition, through a git remote (issue 34, items 2 and 4;
docs/remote.md, "When a push gets no answer" and "After a partition").

``tests/store/test_remote.py`` shows both for a heartbeat; these show them for a release,
the other write that replaces a live claim of this host: once healed, a release the record
chain shows did not land answers LOST (exit 4), not AMBIGUOUS, through records this host
never fetched; and in a silent partition a release waits no longer than the claim has
left, says so, and a retried release after the heal is safe.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from conftest import TESTING, clock_ahead, git, run_cli, wait_for
from cutpush import drop_next_push
from hosts import HOST_B_ENV, git_daemon, make_host, make_server


def _held_while(host: Path, program: str) -> Path:
    """Make ``host``'s origin run ``program`` (upload-pack, over file://) only once the
    returned marker file is gone, while it exists: a partition of its fetches that heals
    when the test removes the marker."""
    marker = host.parent / "hold-uploadpack"
    wrapper = host.parent / "holding-uploadpack"
    wrapper.write_text(
        f'#!/bin/sh\nn=0\nwhile [ -e "{marker}" ] && [ $n -lt 1200 ]; do sleep 0.05; '
        f'n=$((n+1)); done\nexec {program} "$@"\n'
    )
    wrapper.chmod(0o755)
    git("config", "remote.origin.uploadpack", str(wrapper), cwd=host)
    return marker


def _refs(server: Path) -> dict[str, str]:
    out = git("for-each-ref", "--format=%(refname) %(objectname)", "refs/worklease/", cwd=server)
    return dict(line.split(" ") for line in out.stdout.splitlines())


def _revisions(server: Path, resource: str) -> list[int]:
    from gitlease.api.history import log
    from gitlease.store.location import open_store

    return [c.record.revision for c in log(open_store(server, remote=""), resource)]


def test_a_release_cut_off_while_others_took_over_twice_is_lost(tmp_path: Path) -> None:
    """A's release does not land (cut at the server before it commits); before its settling
    fetch, host B takes the claim over, releases it and takes it again. The chain back to
    the release's base runs through records A never fetched: A fetches them by id and
    answers LOST, not AMBIGUOUS, and B's claim is untouched."""
    server = make_server(tmp_path)
    a = make_host(server.as_uri(), tmp_path / "host-a")
    b = make_host(server.as_uri(), tmp_path / "host-b")
    assert run_cli("acquire", "r/gone", "--ttl", "2s", cwd=a).code == 0
    assert run_cli("acquire", "r/gone", cwd=b, env=HOST_B_ENV).code == 3  # B's first sighting
    held = _held_while(a, "git-upload-pack")
    held.touch()
    drop_next_push(server, "prepared")
    # A reads its boot clock a minute behind: as if it had stalled after deciding, so its
    # claim is live as far as it knows, and its wait for the remote is bounded by that
    stalled = {**TESTING, "GITLEASE_TESTING_BOOT_OFFSET_MS": "-60000"}
    release = subprocess.Popen(
        [sys.executable, "-m", "gitlease", "release", "r/gone", "--json"],
        cwd=a, stdout=subprocess.PIPE, text=True, env={**os.environ, **stalled},
    )  # fmt: skip
    wait_for(lambda: (server / "push-dropped").exists() or release.poll() is not None,
             what="A's release push to be cut")  # fmt: skip
    assert release.poll() is None, "the release ended before its push was cut"

    def b_took_it() -> bool:
        got = run_cli("acquire", "r/gone", "--ttl", "1m", cwd=b, env=HOST_B_ENV)
        assert got.code in (0, 3), got
        return got.code == 0

    wait_for(b_took_it, what="B's takeover")
    assert run_cli("release", "r/gone", cwd=b, env=HOST_B_ENV).code == 0
    taken = run_cli("acquire", "r/gone", "--ttl", "1m", "--json", cwd=b, env=HOST_B_ENV)
    assert taken.code == 0, taken
    held.unlink()  # the partition heals: A's settling fetch goes through
    out, _ = release.communicate(timeout=120)
    assert release.returncode == 4, out  # LOST: it did not land and never can
    assert json.loads(out)["error"]["code"] == "LOST"
    assert _revisions(server, "r/gone") == [1, 2, 2, 3]  # B: take, release, take
    assert _refs(server)[taken.json["ref"]] == taken.json["oid"]  # B's claim untouched
    assert run_cli("check", "r/gone", cwd=b, env=HOST_B_ENV).code == 0


def test_a_release_in_a_silent_partition_answers_within_the_claims_time(tmp_path) -> None:
    """A server that accepts the connection and never answers (git daemon under SIGSTOP):
    the release waits for it no longer than the claim has left, plus its short settle, and
    says so (exit 5, the receipt kept); once healed, the retried release is safe and the
    claim is free for others. GITLEASE_REMOTE_TIMEOUT is two minutes: a release bound only
    by it would outlast the test's own limit."""
    make_server(tmp_path)
    slow = {**TESTING, "GITLEASE_REMOTE_TIMEOUT": "120"}
    with git_daemon(tmp_path, keep_pid=True) as url:
        daemon_pid = int((tmp_path / "git-daemon.pid").read_text())
        a = make_host(url + "/server.git", tmp_path / "host-a")
        b = make_host(url + "/server.git", tmp_path / "host-b")
        got = run_cli("acquire", "r/quiet", "--ttl", "60s", "--json", cwd=a, env=slow)
        assert got.code == 0, got
        os.kill(daemon_pid, signal.SIGSTOP)  # connections are accepted, nothing answers
        try:
            # its clock 45 s on: 15 s left of the claim (the command's start takes a few)
            late = {**slow, **clock_ahead(45)}
            out = run_cli("release", "r/quiet", "--json", cwd=a, env=late, timeout=40)
        finally:
            os.kill(daemon_pid, signal.SIGCONT)
        assert out.code == 5, out  # the push may yet land: AMBIGUOUS, and it says why
        message = out.json["error"]["message"]
        assert "no answer within the time the claim had left" in message, message
        receipts = list((a / ".git" / "worklease" / "receipts").glob("*/*.json"))
        assert any(json.loads(p.read_text())["token"] for p in receipts), "receipt dropped"
        again = run_cli("release", "r/quiet", "--json", cwd=a, env=slow)  # healed: retry
        assert again.code == 0, again
        assert run_cli("show", "r/quiet", "--json", cwd=a).json["state"] == "released"
        assert run_cli("acquire", "r/quiet", cwd=b, env=HOST_B_ENV).code == 0
