"""Real worktrees, real `git commit` through the installed hooks."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from commits import commit
from conftest import git, store_git
from forged import put

R = "github/acme/api/7"


def test_bound_worktree_lifecycle(cli, worktrees) -> None:
    from conftest import wait_state

    a, b = worktrees
    assert cli("hooks", "install", cwd=a).code == 0
    assert commit(a)[0], "an unbound worktree commits freely"

    assert cli("acquire", R, "--ttl", "5m", cwd=a).code == 0  # live while it commits
    ok, _ = commit(a)
    assert ok, "a live claim lets the bound worktree commit"

    assert cli("heartbeat", R, "--ttl", "1s", cwd=a).code == 0  # its last: it lapses
    wait_state(cli, R, "expired")
    ok, err = commit(a)
    assert not ok and "commit refused" in err and R in err and "expired" in err
    assert "test-agent" in err and "revision 1" in err and "Re-acquire" in err
    ok, err = commit(a, "--no-verify")
    assert not ok and "prepare-commit-msg" in err, "--no-verify does not skip the check"

    assert cli("acquire", R, "--ttl", "1m", cwd=b).code == 0
    ok, err = commit(a)
    assert not ok and "replaced" in err, "the claim now belongs to another: foreign"
    assert commit(b)[0], "the new holder's worktree commits"

    assert cli("release", R, cwd=b).code == 0
    assert commit(b)[0], "after release the worktree commits freely"
    assert not cli("list", "--json", cwd=b).json["claims"][0]["bound"]


def test_require_claim(cli, worktrees) -> None:
    a, _ = worktrees
    cli("hooks", "install", cwd=a)
    git("config", "gitlease.requireClaim", "true", cwd=a)
    ok, err = commit(a)
    assert not ok and "requireClaim" in err
    assert cli("acquire", "x/1", cwd=a).code == 0
    assert commit(a)[0]
    shown = cli("show", "x/1", "--json", cwd=a).json
    assert shown["bound"] is True


def test_no_bind_and_manual_bind(cli, worktrees) -> None:
    a, _ = worktrees
    cli("hooks", "install", cwd=a)
    assert cli("acquire", R, "--ttl", "1s", "--no-bind", cwd=a).code == 0
    time.sleep(1.2)
    assert commit(a)[0], "--no-bind: the hook does not check this claim"
    assert cli("bind", R, cwd=a).code == 4, "an expired claim cannot be bound"
    assert cli("acquire", "y/2", "--no-bind", cwd=a).code == 0
    assert cli("bind", "y/2", cwd=a).code == 0
    assert cli("list", "--json", cwd=a).json["claims"][-1]["bound"]
    assert cli("unbind", "y/2", cwd=a).code == 0
    assert not cli("list", "--json", cwd=a).json["claims"][-1]["bound"]


def test_tampered_record_and_missing_receipt_refuse(cli, worktrees) -> None:
    a, _ = worktrees
    cli("hooks", "install", cwd=a)
    doc = cli("acquire", R, "--json", cwd=a).json
    assert commit(a)[0]
    receipt = Path(doc["receipt"])
    saved = receipt.read_bytes()
    receipt.unlink()
    ok, err = commit(a)
    assert not ok and "missing" in err
    receipt.write_bytes(saved)
    receipt.chmod(0o644)
    ok, err = commit(a)
    assert not ok and "not trusted" in err
    receipt.chmod(0o600)
    assert commit(a)[0]

    raw = store_git("cat-file", "blob", doc["oid"], cwd=a).stdout.replace(
        "revision 1", "revision 9"
    )
    put(a, doc["ref"], raw.encode())
    ok, err = commit(a)
    assert not ok and "signature" in err


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_foreign_hook_is_kept_chained_and_restored(cli, repo: Path) -> None:
    hook = repo / ".git" / "hooks" / "pre-commit"
    marker = repo / "foreign-ran"
    hook.write_text(f"#!/bin/sh\necho ran >> {marker}\nexit 0\n")
    hook.chmod(0o750)
    before = hook.read_bytes()
    assert cli("hooks", "install").code == 0
    first = files(hook.parent)
    assert cli("hooks", "install").code == 0  # twice changes nothing
    assert files(hook.parent) == first
    assert commit(repo)[0]
    assert marker.read_text() == "ran\n"

    kept = hook.parent / "gitlease-chained" / "pre-commit"
    kept.write_text("#!/bin/sh\nexit 1\n")
    assert not commit(repo)[0], "a failing foreign hook still refuses the commit"
    kept.write_bytes(before)

    status = {h["hook"]: h for h in cli("hooks", "status", "--json").json["hooks"]}
    assert status["pre-commit"]["state"] == "installed" and status["pre-commit"]["chained"]
    assert cli("hooks", "uninstall").code == 0
    assert hook.read_bytes() == before
    assert stat.S_IMODE(hook.stat().st_mode) == 0o750
    assert not (hook.parent / "prepare-commit-msg").exists()
    assert not (hook.parent / "gitlease-chained").exists()


def test_a_kept_hook_sees_its_own_name_in_dollar_zero(cli, repo: Path) -> None:
    """husky's dispatcher finds its script from `basename "$0"` (and exits 0 if it finds none)."""
    hooks = repo / ".git" / "hooks"
    log = repo.parent / "dispatched"
    (hooks / "pre-commit").write_text(
        '#!/usr/bin/env sh\nn=$(basename "$0")\n'
        f'[ "$n" = pre-commit ] || exit 0\necho "$n $(dirname "$0")" >> {log}\n'
    )
    (hooks / "pre-commit").chmod(0o755)
    (hooks / "pre-merge-commit").write_text(  # not a shell script: run directly
        f"#!{sys.executable}\nimport sys\nopen({str(log)!r}, 'a').write('python ran\\n')\n"
    )
    (hooks / "pre-merge-commit").chmod(0o755)
    assert cli("hooks", "install").code == 0
    assert commit(repo)[0]
    assert log.read_text().split("\n")[0] == "pre-commit .git/hooks", "as git runs it"
    tree = git("rev-parse", "HEAD^{tree}", cwd=repo).stdout.strip()
    side = git("commit-tree", tree, "-p", "HEAD", "-m", "side", cwd=repo).stdout.strip()
    git("merge", "--no-ff", "--no-edit", side, cwd=repo)
    assert "python ran" in log.read_text()


def test_absolute_core_hooks_path_is_honoured(cli, repo: Path, worktrees) -> None:
    shared = repo.parent / "shared-hooks"
    git("config", "core.hooksPath", str(shared), cwd=repo)
    assert cli("hooks", "install").code == 0
    assert (shared / "prepare-commit-msg").exists()
    assert not (repo / ".git" / "hooks" / "prepare-commit-msg").exists()
    assert cli("acquire", R, "--ttl", "1s").code == 0
    time.sleep(1.2)
    assert not commit(repo)[0]
    for wt in worktrees:
        assert cli("hooks", "status", cwd=wt).code == 0, "one folder serves every worktree"


def test_hook_check_imports_neither_pygit2_nor_click(cli, repo: Path) -> None:
    assert cli("acquire", R).code == 0  # bound: the check reads, parses and verifies
    code = (
        "import sys, gitlease.hookcheck as h; assert h.problems() == []; "
        "bad = [m for m in ('pygit2', 'click') if m in sys.modules]; print(bad)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=repo,
        capture_output=True,
        text=True,
        env=os.environ,
        check=True,
    ).stdout.strip()
    assert out == "[]"


def pin_python(repo: Path, python: str) -> None:
    """Point the installed hooks at another Python (as an install from it would)."""
    for hook in (repo / ".git" / "hooks").iterdir():
        if hook.is_file() and "gitlease-managed-hook" in hook.read_text():
            pinned = f"gitlease_python={python}"
            hook.write_text(re.sub(r"(?m)^gitlease_python=.*$", pinned, hook.read_text()))


@pytest.fixture
def python_calls(cli, repo: Path) -> Path:
    """The hooks' Python, wrapped to log which hook started it; returns the log's path."""
    calls = repo.parent / "calls"
    wrapper = repo.parent / "python-wrapper"
    # (it logs the argument after the module: `-E -P -m gitlease.hookcheck HOOK`)
    wrapper.write_text(
        "#!/bin/sh\nseen=\nfor a; do\n    case $seen in\n        m) seen=mod ;;\n"
        f'        mod) echo "$a" >> {calls}; break ;;\n'
        '        *) [ "$a" = -m ] && seen=m ;;\n    esac\ndone\n'
        f'exec {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    assert cli("hooks", "install").code == 0
    pin_python(repo, str(wrapper))
    return calls


def test_one_check_per_commit_with_or_without_no_verify(cli, repo: Path, python_calls) -> None:
    assert cli("acquire", R).code == 0
    assert commit(repo)[0]
    assert python_calls.read_text().split() == ["pre-commit"]
    python_calls.unlink()
    assert commit(repo, "--no-verify")[0]
    assert python_calls.read_text().split() == ["prepare-commit-msg"]


def test_an_unbound_worktree_starts_no_python(cli, repo: Path, python_calls) -> None:
    assert commit(repo)[0]
    assert not python_calls.exists(), "the shell hook exits before starting Python"


# ------------------------------------------------------------------ the edges (issues 14, 22)


def lapsed(cli, worktree: Path, resource: str = R) -> None:
    assert cli("acquire", resource, "--ttl", "1s", cwd=worktree).code == 0
    time.sleep(1.2)


def test_gitlease_python_cannot_skip_the_check(cli, repo: Path, monkeypatch) -> None:
    """The hook runs the Python it was installed with; the variable changes nothing."""
    assert cli("hooks", "install").code == 0
    lapsed(cli, repo)
    monkeypatch.setenv("GITLEASE_PYTHON", "true")
    ok, err = commit(repo)
    assert not ok and "commit refused" in err
    ok, err = commit(repo, "--no-verify")
    assert not ok and "commit refused" in err


def test_a_vanished_python_refuses_and_status_says_so(cli, repo: Path) -> None:
    assert cli("hooks", "install").code == 0
    pin_python(repo, str(repo.parent / "deleted-venv" / "bin" / "python"))
    assert cli("acquire", R).code == 0
    ok, err = commit(repo)
    assert not ok and "is gone; run `gitlease hooks install` again" in err
    status = cli("hooks", "status", "--json")
    assert status.code == 6 and {h["state"] for h in status.json["hooks"]} == {"broken"}
    assert cli("hooks", "install").code == 0 and commit(repo)[0]


def side_branch(repo: Path) -> Path:
    """Two commits on `side` and one on main (made before any claim), as patches too."""
    git("checkout", "-qb", "side", cwd=repo)
    for name in ("one", "two"):
        (repo / f"{name}.txt").write_text(name)
        git("add", f"{name}.txt", cwd=repo)
        git("commit", "-qm", name, cwd=repo)
    git("checkout", "-q", "main", cwd=repo)
    (repo / "main.txt").write_text("main")
    git("add", "main.txt", cwd=repo)
    git("commit", "-qm", "main", cwd=repo)
    patches = repo.parent / "patches"
    git("format-patch", "-q", "-o", str(patches), "main..side", cwd=repo)
    return patches


def test_git_am_and_rebase_apply_are_checked(cli, repo: Path) -> None:
    assert cli("hooks", "install").code == 0
    patches = sorted(side_branch(repo).iterdir())
    lapsed(cli, repo)
    am = git("am", *map(str, patches), cwd=repo, check=False)
    assert am.returncode != 0 and "gitlease (applypatch-msg): commit refused" in am.stderr
    git("am", "--abort", cwd=repo)
    git("checkout", "-q", "side", cwd=repo)
    rebase = git("rebase", "--apply", "main", cwd=repo, check=False)
    assert rebase.returncode != 0 and "commit refused" in rebase.stderr + rebase.stdout
    git("rebase", "--abort", cwd=repo)
    assert git("rev-list", "--count", "main..side", cwd=repo).stdout.strip() == "2"

    assert cli("unbind", R).code == 0
    assert cli("acquire", "live/1", "--ttl", "5m").code == 0
    assert git("rebase", "--apply", "main", cwd=repo, check=False).returncode == 0
    git("checkout", "-q", "main", cwd=repo)
    assert git("am", "-3", *map(str, patches), cwd=repo, check=False).returncode == 0


def test_require_claim_refusal_asks_to_acquire_not_to_re_acquire(cli, repo: Path) -> None:
    assert cli("hooks", "install").code == 0
    git("config", "gitlease.requireClaim", "true", cwd=repo)
    ok, err = commit(repo)
    assert not ok and "requireClaim" in err
    assert "Re-acquire" not in err and "gitlease acquire RESOURCE" in err


def test_status_exit_code_says_whether_commits_are_checked(cli, repo: Path) -> None:
    missing = cli("hooks", "status", "--json")
    assert missing.code == 6 and missing.json["in_effect"] is False
    assert missing.json["fix"] == "run `gitlease hooks install`"
    from gitlease.hooks.dirs import HOOK_NAMES

    assert all(name in missing.json["problems"][0] for name in HOOK_NAMES)
    text = cli("hooks", "status")
    assert text.code == 6 and "NOT checked" in text.err and "fix: run" in text.err

    assert cli("hooks", "install").code == 0
    ok = cli("hooks", "status", "--json")
    assert ok.code == 0 and ok.json["in_effect"] and ok.json["problems"] == []

    hook = repo / ".git" / "hooks" / "prepare-commit-msg"
    hook.write_text("#!/bin/sh\nexit 0\n")  # someone else's hook over gitlease's
    foreign = cli("hooks", "status", "--json")
    assert foreign.code == 6 and "prepare-commit-msg" in foreign.json["problems"][0]
    assert cli("hooks", "install").code == 0, "install keeps it and puts the check back"
    assert cli("hooks", "status").code == 0
    assert (repo / ".git" / "hooks" / "gitlease-chained" / "prepare-commit-msg").exists()


def test_acquire_and_bind_warn_where_commits_are_not_checked(cli, repo: Path) -> None:
    got = cli("acquire", "a/1", "--json")
    assert got.code == 0
    assert got.json["commit_check"]["in_effect"] is False
    assert got.json["commit_check"]["fix"] == "run `gitlease hooks install`"
    assert "NOT checked" in got.err and "gitlease hooks install" in got.err
    assert "NOT checked" in cli("acquire", "a/2").err
    quiet = cli("acquire", "a/3", "--no-bind", "--json")
    assert quiet.err == "" and "commit_check" not in quiet.json, "nothing bound: nothing to say"
    bound = cli("bind", "a/3", "--json")
    assert bound.code == 0 and bound.json["commit_check"]["in_effect"] is False
    assert "NOT checked" in bound.err
    bundle = cli("bundle", "acquire", "b/1", "b/2", "--json")
    assert bundle.code == 0 and bundle.json["commit_check"]["in_effect"] is False

    assert cli("hooks", "install").code == 0
    fine = cli("acquire", "a/4", "--json")
    assert fine.code == 0 and fine.err == "" and fine.json["commit_check"]["in_effect"] is True


def test_relative_hooks_path_reaches_each_worktree_or_says_it_cannot(cli, repo: Path) -> None:
    """A relative core.hooksPath is resolved per worktree (husky's .husky/_ is one)."""
    (repo / ".gitignore").write_text(".hooks/\n")
    git("add", ".gitignore", cwd=repo)
    git("commit", "-qm", "ignore the hooks folder", cwd=repo)
    git("config", "core.hooksPath", ".hooks", cwd=repo)
    a, b = repo.parent / "wt-a", repo.parent / "wt-b"
    for wt in (a, b):
        git("worktree", "add", "-q", "-b", wt.name, str(wt), cwd=repo)
    for wt in (repo, a):  # as a manager would make it
        (wt / ".hooks").mkdir()

    first = cli("hooks", "install", "--json")
    assert first.code == 6, "wt-b has no hooks folder: not every worktree is checked"
    by_tree = {Path(w["worktree"]).name: w for w in first.json["worktrees"]}
    assert by_tree["repo"]["in_effect"] and by_tree["wt-a"]["in_effect"]
    assert not by_tree["wt-b"]["in_effect"] and "no hooks folder .hooks" in str(by_tree["wt-b"])
    assert not (b / ".hooks").exists(), "gitlease does not make a folder inside a checkout"
    for wt in (repo, a):
        lapsed(cli, wt)
        assert not commit(wt)[0], f"{wt.name} is checked"

    later = repo.parent / "wt-later"
    git("worktree", "add", "-q", "-b", "later", str(later), cwd=repo)
    for wt in (b, later):
        warned = cli("acquire", f"w/{wt.name}", "--json", cwd=wt)
        assert warned.code == 0 and warned.json["commit_check"]["in_effect"] is False
        assert "no hooks folder" in warned.err and "gitlease hooks install" in warned.err
        assert cli("hooks", "status", cwd=wt).code == 6
    (later / ".hooks").mkdir()
    assert cli("hooks", "install", cwd=later).code == 6, "wt-b still has none"
    assert cli("hooks", "status", cwd=later).code == 0
    lapsed(cli, later, "later/1")
    assert not commit(later)[0]
    assert ".hooks" not in git("status", "--porcelain", cwd=later).stdout, "ignored"


def test_a_committed_hooks_folder_is_never_modified(cli, repo: Path, monkeypatch) -> None:
    bin_dir = os.path.dirname(sys.executable)  # where the gitlease-hook command is
    monkeypatch.setenv("PATH", bin_dir + os.pathsep + os.environ["PATH"])
    folder = repo / ".githooks"
    folder.mkdir()
    (folder / "pre-commit").write_text("#!/bin/sh\necho team hook\n")
    (folder / "pre-commit").chmod(0o755)
    git("add", ".githooks", cwd=repo)
    git("commit", "-qm", "team hooks", cwd=repo)
    git("config", "core.hooksPath", ".githooks", cwd=repo)
    before = files(folder)

    refused = cli("hooks", "install")
    assert refused.code == 6
    assert "part of the checkout" in refused.err and 'gitlease-hook NAME "$@"' in refused.err
    assert files(folder) == before and git("status", "--porcelain", cwd=repo).stdout == ""
    assert "part of the checkout" in cli("acquire", "x/1").err

    from gitlease.hooks.dirs import HOOK_NAMES
    from gitlease.hooks.install import snippet

    for name in HOOK_NAMES:  # the team adds the line and commits it
        path = folder / name
        old = path.read_text().split("\n", 1)[1] if path.exists() else ""
        path.write_text(f"#!/bin/sh\n{snippet(name)}\n{old}")
        path.chmod(0o755)
    git("add", ".githooks", cwd=repo)
    git("commit", "-qm", "check claims", cwd=repo)
    assert cli("hooks", "status").code == 0
    assert cli("hooks", "install").code == 0, "nothing to do: it runs the check"
    later = repo.parent / "wt-later"
    git("worktree", "add", "-q", "-b", "later", str(later), cwd=repo)
    assert cli("hooks", "status", cwd=later).code == 0, "a new worktree checks out the hooks"
    lapsed(cli, later)
    ok, err = commit(later)
    assert not ok and "commit refused" in err
    ok, err = commit(later, "--no-verify")
    assert not ok and "commit refused" in err


def test_a_global_hooks_path_serves_every_repository(cli, repo: Path, monkeypatch) -> None:
    from conftest import make_repo

    config = repo.parent / "global-gitconfig"
    shared = repo.parent / "my-hooks"
    config.write_text(
        Path(os.environ["GIT_CONFIG_GLOBAL"]).read_text() + f"[core]\n\thooksPath = {shared}\n"
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    other = make_repo(repo.parent / "other")
    got = cli("hooks", "install", "--json")
    assert got.code == 0 and got.json["hooks_dir"]["scope"] == "global"
    assert any("every repository" in n for n in got.json["notes"])
    assert cli("hooks", "status", cwd=other).code == 0, "the other repository is covered too"
    lapsed(cli, other)
    assert not commit(other)[0]
    assert commit(repo)[0], "a worktree without a binding commits freely"
    gone = cli("hooks", "uninstall", "--json", cwd=other)
    assert gone.code == 0 and any("every repository" in n for n in gone.json["notes"])
    assert cli("hooks", "status", "--json").json["hooks_dir"]["path"] == str(shared)
    assert files(shared) == {}


def test_uninstall_never_leaves_a_sidelined_copy_enforcing(cli, repo: Path) -> None:
    """lefthook moves a hook it did not write to NAME.old, pre-commit to NAME.legacy."""
    hooks = repo / ".git" / "hooks"
    manager = '#!/bin/sh\n# call_lefthook run "pre-commit"\nexit 0\n'
    (hooks / "pre-commit").write_text(manager)
    (hooks / "pre-commit").chmod(0o755)
    assert cli("hooks", "install").code == 0
    os.rename(hooks / "pre-commit", hooks / "pre-commit.old")  # the manager's reinstall
    (hooks / "pre-commit").write_text(manager)
    (hooks / "pre-commit").chmod(0o755)
    status = cli("hooks", "status", "--json")
    assert status.code == 6 and "pre-commit.old" in status.json["problems"][0]
    assert cli("hooks", "uninstall").code == 0
    left = {k: v for k, v in files(hooks).items() if not k.endswith(".sample")}
    assert left == {"pre-commit": manager.encode()}


def test_the_gitlease_hook_command(cli, repo: Path) -> None:
    """What a manager's configuration runs: the check once, 0 or 1; no hook name is 2."""
    exe = str(Path(sys.executable).parent / "gitlease-hook")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([exe, *args], cwd=repo, capture_output=True, text=True)

    assert run().returncode == 2 and "usage: gitlease-hook HOOK-NAME" in run().stderr
    assert run("pre-commit").returncode == 0, "no binding: the commit may proceed"
    lapsed(cli, repo)
    refused = run("prepare-commit-msg", ".git/COMMIT_EDITMSG", "message")
    assert (
        refused.returncode == 1
        and "gitlease (prepare-commit-msg): commit refused" in refused.stderr
    )
