"""Fenced pushes: trailers written by the real commit hooks, judged by a real server's
pre-receive hook (over ``file://`` and a real ``git daemon``) and by ``fence-check`` in a
CI-like script (see docs/fencing.md)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import make_repo, run_cli, taken_over, wait_for
from hosts import HOST_B_ENV, git_daemon, make_host, make_server

from gitlease.errors import UsageError
from gitlease.fence.trailer import Trailer, parse_trailer

R = "github/acme/api/42"
BIN = str(Path(sys.executable).parent)


def g(
    *args: str, cwd: Path, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        text=True,
        capture_output=True,
        env={**os.environ, **(env or {})},
        check=check,
    )


def commit(
    host: Path, name: str, *extra: str, env: dict[str, str] | None = None, message: str = ""
) -> str:
    """A real ``git commit`` through the installed hooks; its id."""
    (host / f"{name}.txt").write_text(f"{name} {time.time_ns()}\n")
    g("add", f"{name}.txt", cwd=host)
    done = g(
        "commit", "-q", "-m", message or f"work {name}", *extra, cwd=host, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    return g("rev-parse", "HEAD", cwd=host).stdout.strip()


def trailers(repo: Path, rev: str = "HEAD") -> list[str]:
    """The commit's Gitlease-Claim trailer values, as git parses them."""
    out = g("log", "-1", "--format=%(trailers:key=Gitlease-Claim,valueonly)", rev, cwd=repo)
    return [line for line in out.stdout.splitlines() if line]


def claim_trailer(cli_json: dict) -> str:
    return Trailer(cli_json["resource"], cli_json["claim_id"], cli_json["revision"]).value()


def push(host: Path, *refspecs: str, env: dict[str, str] | None = None):
    return g("push", "--porcelain", "origin", *refspecs, cwd=host, env=env, check=False)


def said(result: subprocess.CompletedProcess[str]) -> str:
    """What the server said, as one line of words (git prefixes each line with remote:)."""
    text = re.sub(r"(?m)^remote: ?", "", result.stderr)
    return " ".join(text.split())


def server_ref(server: Path, ref: str = "refs/heads/main") -> str:
    return g("rev-parse", "--verify", "-q", ref, cwd=server, check=False).stdout.strip()


@pytest.fixture(params=["file", "daemon"])
def fenced(request: pytest.FixtureRequest, tmp_path: Path):
    """A bare server with the fencing hook, and two hosts with the commit hooks and trailers."""
    server = make_server(tmp_path)
    assert run_cli("hooks", "install", "--server", cwd=server).code == 0
    with contextlib.ExitStack() as stack:
        if request.param == "daemon":
            url = stack.enter_context(git_daemon(tmp_path)) + "/server.git"
        else:
            url = server.as_uri()
        a = make_host(url, tmp_path / "host-a")
        b = make_host(url, tmp_path / "host-b")
        for host in (a, b):
            assert run_cli("hooks", "install", cwd=host).code == 0
            g("config", "gitlease.trailers", "true", cwd=host)

        def on_a(*args: str, **kw):
            return run_cli(*args, cwd=kw.pop("cwd", a), **kw)

        def on_b(*args: str, env: dict[str, str] | None = None, **kw):
            return run_cli(*args, cwd=kw.pop("cwd", b), env={**HOST_B_ENV, **(env or {})}, **kw)

        yield SimpleNamespace(a=a, b=b, server=server, url=url, on_a=on_a, on_b=on_b)


# ------------------------------------------------------------------ the trailer


@pytest.mark.parametrize(
    "resource",
    [R, "Jira/ABC-1", "jira/ABC 1", "a b/c  d", "ünïcödé/ß", "x%41/.lease", "a" * 300, "//x//"],
)
def test_a_trailer_parses_back_to_exactly_its_claim(resource: str) -> None:
    trailer = Trailer(resource, "c-0123456789abcdef", 7)
    value = trailer.value()
    assert " " not in value.split(" ", 1)[0] and value.isascii()
    assert parse_trailer(value) == trailer
    assert trailer.line() == f"Gitlease-Claim: {value}"


@pytest.mark.parametrize(
    "value",
    [
        "",
        "github/acme/api/42 c-0123456789abcdef",
        "github/acme/api/42 c-0123456789abcdef r1 extra",
        "github/acme/api/42  c-0123456789abcdef r1",
        "GitHub/acme c-0123456789abcdef r1",  # not how a ref spells it
        "github/acme/api/42 c-0123456789ABCDEF r1",
        "github/acme/api/42 c-0123 r1",
        "github/acme/api/42 c-0123456789abcdef 1",
        "github/acme/api/42 c-0123456789abcdef r01",
        "github/acme/api/42 c-0123456789abcdef r-1",
        "refs/worklease/x.lease c-0123456789abcdef r1",
    ],
)
def test_a_malformed_trailer_is_refused(value: str) -> None:
    with pytest.raises(UsageError):
        parse_trailer(value)


# ------------------------------------------------------------------ the commit hook


def test_commits_name_every_bound_claim_once(cli, repo: Path) -> None:
    assert cli("hooks", "install").code == 0
    one = cli("acquire", R, "--json").json
    commit(repo, "off")
    assert trailers(repo) == [], "trailers are opt-in (gitlease.trailers)"

    g("config", "gitlease.trailers", "true", cwd=repo)
    two = cli("acquire", "jira/ABC 1", "--json").json
    commit(repo, "on")
    expected = sorted(
        [claim_trailer(one), claim_trailer(two)], key=lambda v: parse_trailer(v).resource
    )
    assert trailers(repo) == expected
    body = g("log", "-1", "--format=%B", cwd=repo).stdout
    assert body.startswith("work on\n\nGitlease-Claim: ")
    assert "glt_" not in body, "no secret in the message"

    g("commit", "-q", "--amend", "--no-edit", cwd=repo)
    assert trailers(repo) == expected, "amend adds no duplicate"
    g("commit", "-q", "--amend", "-m", f"reworded\n\nAcked-by: someone\n{expected[0]}", cwd=repo)
    assert trailers(repo) == expected
    assert "Acked-by: someone" in g("log", "-1", "--format=%B", cwd=repo).stdout

    commit(repo, "noverify", "--no-verify")
    assert trailers(repo) == expected, "--no-verify skips pre-commit, not the trailer step"

    assert cli("release", "jira/ABC 1").code == 0
    commit(repo, "one-left")
    assert trailers(repo) == [claim_trailer(one)]


def test_with_trailers_on_a_lapsed_claim_still_refuses_the_commit(cli, repo: Path) -> None:
    cli("hooks", "install")
    g("config", "gitlease.trailers", "true", cwd=repo)
    assert cli("acquire", R, "--ttl", "1s").code == 0
    time.sleep(1.2)
    for extra in ((), ("--no-verify",)):
        (repo / "f.txt").write_text(f"{time.time_ns()}\n")
        g("add", "f.txt", cwd=repo)
        refused = g("commit", "-qm", "late", *extra, cwd=repo, check=False)
        assert refused.returncode != 0 and "commit refused" in refused.stderr, extra
        assert R in refused.stderr and "expired" in refused.stderr
    # pre-commit leaves the check to prepare-commit-msg only while that is gitlease's hook too
    (repo / ".git" / "hooks" / "prepare-commit-msg").write_text("#!/bin/sh\nexit 0\n")
    refused = g("commit", "-qm", "late", cwd=repo, check=False)
    assert refused.returncode != 0 and "gitlease (pre-commit): commit refused" in refused.stderr
    g("reset", "-q", cwd=repo)
    assert g("rev-list", "--count", "HEAD", cwd=repo).stdout.strip() == "1"


def test_an_editor_commit_keeps_its_subject_apart_from_the_trailers(cli, repo: Path) -> None:
    cli("hooks", "install")
    g("config", "gitlease.trailers", "true", cwd=repo)
    claim = cli("acquire", R, "--json").json
    (repo / "f.txt").write_text("x\n")
    g("add", "f.txt", cwd=repo)
    typed = {"GIT_EDITOR": "sed -i '1s/^/typed subject/'"}
    g("commit", "-q", cwd=repo, env=typed)
    assert g("log", "-1", "--format=%s", cwd=repo).stdout.strip() == "typed subject"
    assert trailers(repo) == [claim_trailer(claim)]


def test_a_rewritten_commit_carries_the_claim_held_now(cli, repo: Path) -> None:
    cli("hooks", "install")
    g("config", "gitlease.trailers", "true", cwd=repo)
    base = g("rev-parse", "HEAD", cwd=repo).stdout.strip()
    old = cli("acquire", R, "--json").json
    other = Trailer("jira/OTHER-1", "c-00000000000000aa", 3).line()
    commit(repo, "first", message=f"first\n\n{other}")
    commit(repo, "second")
    assert trailers(repo) == [claim_trailer(old)]
    assert cli("release", R).code == 0
    new = cli("acquire", R, "--json").json
    assert new["claim_id"] != old["claim_id"]
    g("rebase", "-q", "--force-rebase", base, cwd=repo)
    assert trailers(repo) == [claim_trailer(new)]
    first = trailers(repo, "HEAD~1")
    assert claim_trailer(new) in first and other.split(": ", 1)[1] in first, (
        "the rebased commit names the claim held now, and keeps other resources' trailers"
    )
    assert claim_trailer(old) not in first


# ------------------------------------------------------------------ the server


def test_work_from_a_live_claim_passes_and_a_lost_claims_work_is_refused(fenced) -> None:
    a, b = fenced.a, fenced.b
    mine = fenced.on_a("acquire", R, "--ttl", "5m", "--json").json  # live while A works
    first = commit(a, "a1")
    assert push(a, "HEAD:main").returncode == 0
    assert server_ref(fenced.server) == first, "a push from a live claim lands"

    assert fenced.on_a("heartbeat", R).code == 0
    commit(a, "a2")  # work done while the claim is live, pushed only after it was lost
    assert fenced.on_b("acquire", R).code == 3  # host B's first sighting
    assert fenced.on_a("heartbeat", R, "--ttl", "2s").code == 0  # A's last: it lapses
    theirs = taken_over(lambda: fenced.on_b("acquire", R, "--json"))
    refused = push(a, "HEAD:main")
    assert refused.returncode != 0
    err = said(refused)
    assert R in err and mine["claim_id"] in err and theirs.json["claim_id"] in err, err
    assert "replaced" in err and "re-acquire" in err and "rebase" in err and "fetch" in err
    assert server_ref(fenced.server) == first, "nothing landed"

    # the way back: the new holder's work lands, then A re-acquires and rebases onto it
    g("pull", "-q", "--rebase", cwd=b, env=HOST_B_ENV)
    commit(b, "b1", env=HOST_B_ENV)
    assert push(b, "HEAD:main", env=HOST_B_ENV).returncode == 0
    assert fenced.on_b("release", R).code == 0
    assert fenced.on_a("acquire", R).code == 0
    g("fetch", "-q", "origin", cwd=a)
    g("rebase", "-q", "--force-rebase", "origin/main", cwd=a)
    again = push(a, "HEAD:main")
    assert again.returncode == 0, again.stderr


def test_after_a_release_the_claims_later_pushes_are_refused(fenced) -> None:
    a = fenced.a
    assert fenced.on_a("acquire", R).code == 0
    landed = commit(a, "before")
    assert push(a, "HEAD:feature").returncode == 0
    late = commit(a, "late")
    assert fenced.on_a("release", R).code == 0
    refused = push(a, "HEAD:main")
    assert refused.returncode != 0 and "released" in said(refused) and R in said(refused)
    # commits that landed while the claim was live are durable state: they move on freely
    assert push(a, f"{landed}:main").returncode == 0
    assert server_ref(fenced.server) == landed
    assert late != landed


def test_an_expired_claim_that_nobody_replaced_still_passes(fenced) -> None:
    a = fenced.a
    assert fenced.on_a("acquire", R, "--ttl", "5m").code == 0
    commit(a, "slow")
    assert fenced.on_a("heartbeat", R, "--ttl", "1s").code == 0  # then nobody renews it
    wait_for(lambda: fenced.on_a("check", R).code == 4, what="the claim to expire")
    assert fenced.on_a("check", R).code == 4  # expired on the holder's clock
    assert push(a, "HEAD:main").returncode == 0, "the server never judges a host's clock"


def test_commits_without_trailers_pass_unless_the_ref_is_protected(fenced) -> None:
    a, server = fenced.a, fenced.server
    g("config", "gitlease.trailers", "false", cwd=a)
    plain = commit(a, "plain")
    assert push(a, "HEAD:main").returncode == 0, "no trailer, no requirement: it passes"

    g("config", "gitlease.requireClaim", "true", cwd=server)
    g("config", "--add", "gitlease.protect", "refs/heads/main", cwd=server)
    g("config", "--add", "gitlease.protect", "refs/heads/release/*", cwd=server)
    bare = commit(a, "bare")
    refused = push(a, "HEAD:main")
    assert refused.returncode != 0
    assert "refs/heads/main" in said(refused) and "no Gitlease-Claim trailer" in said(refused)
    assert "git config gitlease.trailers true" in said(refused)
    assert push(a, "HEAD:release/1").returncode != 0, "a pattern protects"
    assert push(a, "HEAD:feature").returncode == 0, "an unprotected ref takes it"
    fast_forward = push(a, "feature:main")
    assert fast_forward.returncode != 0, "a commit pushed elsewhere first still needs a claim"
    assert server_ref(server) == plain

    g("config", "gitlease.trailers", "true", cwd=a)
    assert fenced.on_a("acquire", R).code == 0
    g("reset", "-q", "--hard", plain, cwd=a)
    claimed = commit(a, "claimed")
    assert push(a, "HEAD:main").returncode == 0
    assert server_ref(server) == claimed and claimed != bare

    g("config", "--unset-all", "gitlease.protect", cwd=server)  # default: every branch
    g("config", "gitlease.trailers", "false", cwd=a)
    commit(a, "bare-again")
    assert push(a, "HEAD:topic").returncode != 0, "without gitlease.protect: refs/heads/*"
    assert push(a, "HEAD:refs/tags/v1").returncode == 0, "tags are not branches"


def test_claim_updates_pass_in_the_same_push(fenced) -> None:
    """The remote mode works through the hook; a push that moves a claim ref and a branch
    together is judged on the claim both before and after it."""
    a, server = fenced.a, fenced.server
    ref = Trailer(R, "c-0000000000000000", 1).ref
    assert fenced.on_a("acquire", R, "--json").code == 0
    assert fenced.on_b("acquire", R).code == 3
    assert fenced.on_a("heartbeat", R).code == 0
    work = commit(a, "together")
    # a heartbeat written here only, pushed with the work: the claim holds after the push too
    assert fenced.on_a("heartbeat", R, "--remote", "").code == 0
    local = g("rev-parse", ref, cwd=a).stdout.strip()
    both = g("push", "--atomic", "origin", "HEAD:main", f"+{ref}:{ref}", cwd=a, check=False)
    assert both.returncode == 0, both.stderr
    assert server_ref(server) == work and server_ref(server, ref) == local

    more = commit(a, "with-release")
    assert fenced.on_a("release", R, "--remote", "").code == 0  # released here only
    released = g("rev-parse", ref, cwd=a).stdout.strip()
    refused = g("push", "--atomic", "origin", "HEAD:main", f"+{ref}:{ref}", cwd=a, check=False)
    assert refused.returncode != 0
    assert "this push also moves" in said(refused) and "releases" in said(refused)
    assert server_ref(server) == work and server_ref(server, ref) == local
    # the claim update alone passes (how every gitlease write reaches the server)
    assert g("push", "origin", f"+{ref}:{ref}", cwd=a, check=False).returncode == 0
    assert server_ref(server, ref) == released
    assert more != work


def test_an_existing_pre_receive_hook_still_runs(tmp_path: Path) -> None:
    server = make_server(tmp_path)
    hook = server / "hooks" / "pre-receive"
    log = tmp_path / "foreign.log"
    hook.write_text(f'#!/bin/sh\ncat >> "{log}"\necho foreign-ran >> "{log}"\nexit 0\n')
    hook.chmod(0o750)
    before = hook.read_bytes()
    assert run_cli("hooks", "install", "--server", cwd=server).code == 0
    first = {p.name: p.read_bytes() for p in hook.parent.iterdir()}
    assert run_cli("hooks", "install", "--server", cwd=server).code == 0
    assert {p.name: p.read_bytes() for p in hook.parent.iterdir()} == first, "twice: no change"
    status = run_cli("hooks", "status", "--server", "--json", cwd=server).json["hooks"]
    assert status == [{"hook": "pre-receive", "path": str(hook), "state": "installed",
                       "chained": True}]  # fmt: skip

    a = make_host(server.as_uri(), tmp_path / "host-a")
    run_cli("hooks", "install", cwd=a)
    g("config", "gitlease.trailers", "true", cwd=a)
    assert run_cli("acquire", R, cwd=a).code == 0
    tip = commit(a, "x")
    assert push(a, "HEAD:main").returncode == 0
    lines = log.read_text().splitlines()
    assert lines.count("foreign-ran") == 2, "it ran for the claim push and for the branch"
    assert any(line.endswith(f"{tip} refs/heads/main") for line in lines), "with the same input"
    assert any("refs/worklease/" in line for line in lines)

    chained = hook.parent / "pre-receive.gitlease-chained"
    chained.write_text("#!/bin/sh\necho 'foreign says no' >&2\nexit 1\n")
    commit(a, "y")
    refused = push(a, "HEAD:main")
    assert refused.returncode != 0 and "foreign says no" in said(refused)
    chained.write_bytes(before)

    assert run_cli("hooks", "uninstall", "--server", cwd=server).code == 0
    assert hook.read_bytes() == before and not chained.exists()
    assert (
        run_cli("hooks", "status", "--server", "--json", cwd=server).json["hooks"][0]["state"]
        == "foreign"
    )


def test_a_record_that_does_not_verify_refuses_the_push(fenced) -> None:
    a, server = fenced.a, fenced.server
    doc = fenced.on_a("acquire", R, "--json").json
    commit(a, "under-forged")
    raw = g("cat-file", "blob", doc["oid"], cwd=server).stdout.replace("revision 1", "revision 9")
    forged = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"], cwd=server, input=raw, text=True,
        capture_output=True, check=True,
    ).stdout.strip()  # fmt: skip
    g("update-ref", doc["ref"], forged, cwd=server)
    refused = push(a, "HEAD:main")
    assert refused.returncode != 0 and "does not verify" in said(refused), said(refused)
    assert "verify" in said(refused) and "fixed at the server" in said(refused)
    check = run_cli("fence-check", "--remote", "origin", "origin/main..HEAD", "--json", cwd=a)
    assert check.code == 7 and check.json["claims"][0]["verdict"] == "invalid", check


def test_unknown_and_unreadable_trailers_are_refused(fenced) -> None:
    a = fenced.a
    doc = fenced.on_a("acquire", R, "--json").json
    assert fenced.on_a("unbind", R).code == 0  # no binding: the hook adds no trailer
    forged = Trailer(R, "c-" + "f" * 16, doc["revision"]).line()
    commit(a, "forged", message=f"forged\n\n{forged}")
    refused = push(a, "HEAD:main")
    assert refused.returncode != 0 and "does not know" in said(refused)
    g("reset", "-q", "--hard", "HEAD~1", cwd=a)
    wrong = Trailer(R, doc["claim_id"], doc["revision"] - 1).line()
    commit(a, "wrong-revision", message=f"wrong revision\n\n{wrong}")
    refused = push(a, "HEAD:main")
    assert refused.returncode != 0 and "does not know" in said(refused)
    g("reset", "-q", "--hard", "HEAD~1", cwd=a)
    nowhere = Trailer("never/acquired", "c-" + "1" * 16, 1).line()
    commit(a, "nowhere", message=f"nowhere\n\n{nowhere}")
    refused = push(a, "HEAD:main")
    assert refused.returncode != 0 and "has no claim on never/acquired" in said(refused)
    g("reset", "-q", "--hard", "HEAD~1", cwd=a)
    commit(a, "garbled", message="garbled\n\nGitlease-Claim: \x1b[31mred c-1 r1")
    refused = push(a, "HEAD:main")
    assert refused.returncode != 0 and "cannot be read" in said(refused)
    assert "\x1b" not in said(refused), "text from a commit is escaped"


# ------------------------------------------------------------------ fence-check


CI_SCRIPT = """\
set -eu
rm -rf ci && git clone -q "$CODE" ci && cd ci
gitlease fence-check --remote "$CLAIMS" "$BEFORE..$AFTER"
"""


def test_fence_check_in_ci_gives_the_server_hooks_verdicts(tmp_path: Path) -> None:
    """Code on a hosting service without hooks, claims on a coordinator with the hook: every
    push goes to both, and a CI job judges what landed on the hosting service."""
    coordinator = make_server(tmp_path)
    assert run_cli("hooks", "install", "--server", cwd=coordinator).code == 0
    hosting = tmp_path / "hosting.git"
    g("clone", "-q", "--bare", str(coordinator), str(hosting), cwd=tmp_path)
    a = make_host(coordinator.as_uri(), tmp_path / "host-a")
    b = make_host(coordinator.as_uri(), tmp_path / "host-b")
    for host in (a, b):
        run_cli("hooks", "install", cwd=host)
        g("config", "gitlease.trailers", "true", cwd=host)
        g("remote", "add", "hosting", hosting.as_uri(), cwd=host)
    ci_env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}",
              "CODE": hosting.as_uri(), "CLAIMS": coordinator.as_uri()}  # fmt: skip

    proposals = iter(range(1, 100))

    def both(host: Path, env: dict[str, str] | None = None) -> tuple[bool, bool]:
        """(the server hook accepted, the CI job passed) for the same work: pushed to the
        coordinator's main, and proposed on the hosting service as a branch that a CI job
        checks against main (a pull request's required check)."""
        branch = f"refs/heads/proposal-{next(proposals)}"
        g("push", "-q", "hosting", f"HEAD:{branch}", cwd=host, env=env)
        hook = g("push", "-q", "origin", "HEAD:main", cwd=host, env=env, check=False)
        assert hook.returncode == 0 or "pre-receive hook declined" in hook.stderr, hook.stderr
        base = server_ref(hosting)
        if hook.returncode == 0:  # merged: the hosting service's main follows
            g("push", "-q", "hosting", "HEAD:main", cwd=host, env=env)
        job = subprocess.run(
            ["bash", "-c", CI_SCRIPT], cwd=tmp_path, capture_output=True, text=True,
            env={**ci_env, "BEFORE": base, "AFTER": server_ref(hosting, branch)},
        )  # fmt: skip
        assert job.returncode in (0, 4), job.stderr
        return hook.returncode == 0, job.returncode == 0

    assert run_cli("acquire", R, "--ttl", "5m", cwd=a).code == 0  # live while A works
    commit(a, "live")
    assert both(a) == (True, True)

    assert run_cli("heartbeat", R, cwd=a).code == 0
    commit(a, "lost")  # while the claim is live; pushed after host B took it over
    assert run_cli("acquire", R, cwd=b, env=HOST_B_ENV).code == 3
    assert run_cli("heartbeat", R, "--ttl", "2s", cwd=a).code == 0  # A's last: it lapses
    taken_over(lambda: run_cli("acquire", R, cwd=b, env=HOST_B_ENV))
    assert both(a) == (False, False), "replaced"

    g("pull", "-q", "--rebase", "origin", "main", cwd=b, env=HOST_B_ENV)
    commit(b, "theirs", env=HOST_B_ENV)
    assert both(b, HOST_B_ENV) == (True, True)
    commit(b, "after-release", env=HOST_B_ENV)
    assert run_cli("release", R, cwd=b, env=HOST_B_ENV).code == 0
    assert both(b, HOST_B_ENV) == (False, False), "released"

    g("config", "gitlease.trailers", "false", cwd=b)
    g("reset", "-q", "--hard", "origin/main", cwd=b)
    commit(b, "plain", env=HOST_B_ENV)
    assert both(b, HOST_B_ENV) == (True, True), "no trailer, no requirement"


def test_fence_check_stdin_in_any_pre_receive(tmp_path: Path) -> None:
    """A hook that runs `gitlease fence-check --stdin` (a hook manager's pre-receive) refuses
    what the shipped hook refuses."""
    server = make_server(tmp_path)
    hook = server / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\nexec {BIN}/gitlease fence-check --stdin --require-claim\n")
    hook.chmod(0o755)
    a = make_host(server.as_uri(), tmp_path / "host-a")
    run_cli("hooks", "install", cwd=a)
    g("config", "gitlease.trailers", "true", cwd=a)
    assert run_cli("acquire", R, cwd=a).code == 0, "claim pushes pass through it too"
    commit(a, "live")
    assert push(a, "HEAD:main").returncode == 0
    commit(a, "late")
    assert run_cli("release", R, cwd=a).code == 0
    refused = push(a, "HEAD:main")
    assert refused.returncode != 0 and "released" in said(refused)
    assert "unexpected error" not in said(refused), "a refusal in words, not a crash"
    g("config", "gitlease.trailers", "false", cwd=a)
    g("reset", "-q", "--hard", "origin/main", cwd=a)
    commit(a, "bare")
    refused = push(a, "HEAD:main")
    assert refused.returncode != 0 and "no Gitlease-Claim trailer" in said(refused)


def test_fence_check_reports_in_json_and_refuses_bad_input(cli, repo: Path) -> None:
    cli("hooks", "install")
    g("config", "gitlease.trailers", "true", cwd=repo)
    base = g("rev-parse", "HEAD", cwd=repo).stdout.strip()
    doc = cli("acquire", R, "--json").json
    for i in range(3):
        commit(repo, f"c{i}")
    ok = cli("fence-check", f"{base}..HEAD", "--json")
    assert ok.code == 0, ok
    claim = ok.json["claims"][0]
    assert ok.json["ok"] and ok.json["commits"] == 3 and claim["commits"] == 3
    assert (claim["resource"], claim["claim_id"], claim["verdict"]) == (
        R,
        doc["claim_id"],
        "current",
    )
    assert cli("fence-check", f"{base}..HEAD").out.startswith("fence-check: 3 commits, 1 claim")

    elsewhere = Trailer("claimed/elsewhere", "c-" + "2" * 16, 1).line()
    assert cli("unbind", R).code == 0
    commit(repo, "elsewhere", message=f"from another store\n\n{elsewhere}")
    unknown = cli("fence-check", "HEAD~1..HEAD")
    assert unknown.code == 4 and "has no claim on claimed/elsewhere" in unknown.err
    assert "name it with --remote" in unknown.err, "a hint for a CI job that forgot --remote"
    g("reset", "-q", "--hard", "HEAD~1", cwd=repo)

    g("config", "gitlease.requireClaim", "true", cwd=repo)
    assert cli("fence-check", "HEAD~1..HEAD").code == 0
    assert cli("fence-check", "HEAD").code == 4, "the first commit has no trailer"
    assert cli("fence-check", "HEAD", "--no-require-claim").code == 0

    for bad in ([], ["--stdin", "HEAD"], ["--output=/tmp/x"], ["nosuch..HEAD"],
                ["HEAD", "--protect", "refs/heads/*"]):  # fmt: skip
        out = cli("fence-check", *bad, "--json", input="")
        assert out.code == 2 and "error" in out.json, (bad, out)
    out = cli("fence-check", "--stdin", "--json", input="not a line\n")
    assert out.code == 2 and "OLD-OID NEW-OID REF" in out.json["error"]["message"]
    g("config", "gitlease.protect", "main", cwd=repo)
    line = f"{'0' * 40} {g('rev-parse', 'HEAD', cwd=repo).stdout.strip()} refs/heads/x\n"
    out = cli("fence-check", "--stdin", "--json", input=line)
    assert out.code == 2 and "full ref name" in out.json["error"]["message"]


def test_the_hook_paths_import_neither_pygit2_nor_click(tmp_path: Path) -> None:
    code = (
        "import sys, gitlease.fence, gitlease.fence.server; "
        "print([m for m in ('pygit2', 'click', 'cryptography') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    repo = make_repo(tmp_path / "r")
    msg = repo / "msg"
    msg.write_text("x\n")
    plain = subprocess.run(
        [sys.executable, "-m", "gitlease.fence", "prepare-commit-msg", str(msg)], cwd=repo,
        capture_output=True, text=True,
    )  # fmt: skip
    assert plain.returncode == 0 and msg.read_text() == "x\n", "trailers off: untouched"
