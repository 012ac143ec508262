"""gitlease's commit check next to the real hook managers: pre-commit, lefthook and husky.

Each manager is the real one, installed for this test session (pre-commit and lefthook from
the `test` extra, husky with npm into a temporary folder, once). A manager that cannot be had
is skipped with its name, unless GITLEASE_REQUIRE_MANAGERS=1 (as in CI), where it fails.

Every scenario has two linked worktrees and one added later, and checks in each: a live claim
commits; a lapsed one is refused, also with `--no-verify` and for a merge; the manager's own
hook still runs (it refuses a file containing a marker).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT, git, make_repo, run_cli

MARKER = "FORBIDDEN-MARKER"
BIN = Path(sys.executable).parent
HOWTO = ROOT / "docs" / "howto" / "hook-managers.md"


def env() -> dict[str, str]:
    """PATH with this Python's bin first: the `gitlease-hook` command and the managers."""
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def missing(name: str, why: str) -> None:
    message = f"hook manager {name} is not available ({why})"
    if os.environ.get("GITLEASE_REQUIRE_MANAGERS") == "1":
        pytest.fail(message + "; GITLEASE_REQUIRE_MANAGERS=1 requires it")
    pytest.skip(message)


def run(*args: str | Path, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env(), text=True, capture_output=True, timeout=120
    )
    if check and result.returncode != 0:
        raise AssertionError(f"{args} exited {result.returncode}:\n{result.stdout}{result.stderr}")
    return result


@pytest.fixture(scope="session")
def husky_modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One `npm install husky@9` per test session: its node_modules folder."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        missing("husky", "node and npm are not on PATH")
    folder = tmp_path_factory.mktemp("husky")
    result = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--no-package-lock", "husky@9"],
        cwd=folder,
        env={**os.environ, "npm_config_cache": str(folder / ".npm-cache")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    modules = folder / "node_modules"
    if result.returncode != 0 or not (modules / "husky" / "bin.js").is_file():
        missing("husky", f"npm install failed: {result.stderr.strip()[-500:]}")
    return modules


def tool(name: str) -> Path:
    path = BIN / name
    found = path if path.exists() else shutil.which(name)
    if not found:
        missing(name, f"`{name}` is not installed: pip install '.[test]'")
    probe = subprocess.run([str(found), "--version"], capture_output=True, text=True)
    if name == "lefthook" and probe.returncode != 0:
        probe = subprocess.run([str(found), "version"], capture_output=True, text=True)
    if probe.returncode != 0:
        missing(name, f"`{found}` does not run: {probe.stderr.strip()[-300:]}")
    return Path(found)


# ------------------------------------------------------------------ the managers


@dataclass
class Manager:
    """How to set a manager up in a repository, (re)install it, and where its hooks live."""

    name: str
    files: dict[str, str]  # committed files that configure it (path: text)
    install: Callable[[Path], None]  # run in one worktree
    per_worktree: bool  # its hooks folder is per worktree (run install in each)
    refusal: str  # what its own hook prints when it refuses the marker


def pre_commit(native: bool = False) -> Manager:
    exe = tool("pre-commit")
    config = (
        snippet("pre-commit-config")
        if native
        else "default_install_hook_types: [pre-commit]\nrepos:\n"
    )
    config += (
        "  - repo: local\n"
        "    hooks:\n"
        "      - id: no-marker\n"
        "        name: no marker\n"
        f"        entry: {MARKER}\n"
        "        language: pygrep\n"
        "        stages: [pre-commit]\n"
    )
    return Manager(
        "pre-commit",
        {".pre-commit-config.yaml": config},
        lambda wt: run(exe, "install", cwd=wt) and None,
        per_worktree=False,
        refusal="no marker",
    )


def lefthook(native: bool = False) -> Manager:
    exe = tool("lefthook")
    section = "pre-commit:\n  commands:\n"
    marker = f'    no-marker:\n      run: "! grep -l {MARKER} .stage-check"\n'
    if native:
        config = snippet("lefthook.yml")
        assert section in config
        config = config.replace(section, section + marker, 1)
    else:
        config = section + marker
    return Manager(
        "lefthook",
        {"lefthook.yml": config},
        lambda wt: run(exe, "install", cwd=wt) and None,
        per_worktree=False,
        refusal="no-marker",
    )


def husky(modules: Path, native: bool = False) -> Manager:
    files = {
        ".gitignore": "node_modules\n",
        ".husky/pre-commit": f"! grep -l {MARKER} .stage-check\n",
    }
    if native:
        for name, text in husky_snippets().items():
            files[f".husky/{name}"] = text + files.get(f".husky/{name}", "")

    def install(wt: Path) -> None:
        link = wt / "node_modules"
        if not link.exists():
            link.symlink_to(modules)
        run("node", link / "husky" / "bin.js", cwd=wt)  # what `npx husky` runs

    return Manager("husky", files, install, per_worktree=True, refusal="husky - pre-commit")


def snippet(name: str) -> str:
    """A snippet from the how-to page: the block after `<!-- snippet: NAME -->`."""
    text = HOWTO.read_text(encoding="utf-8")
    found = re.search(rf"<!-- snippet: {re.escape(name)} -->\n```\w*\n(.*?)```", text, re.S)
    assert found, f"{HOWTO} has no snippet {name}"
    return found.group(1)


def husky_snippets() -> dict[str, str]:
    """The husky hook scripts the how-to page shows: `.husky/NAME` and its line."""
    lines = snippet("husky").splitlines()
    out: dict[str, str] = {}
    for i, line in enumerate(lines):
        found = re.match(r"# \.husky/(\S+)", line)
        if found:
            out[found.group(1)] = lines[i + 1] + "\n"
    assert len(out) == 5, out
    return out


# ------------------------------------------------------------------ one repository


class Scene:
    """A repository that uses a manager, with two linked worktrees (and later a third)."""

    def __init__(self, root: Path, manager: Manager) -> None:
        self.manager = manager
        self.repo = make_repo(root / "repo")
        for path, text in manager.files.items():
            target = self.repo / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        git("add", "-A", cwd=self.repo)
        git("commit", "-qm", f"use {manager.name}", cwd=self.repo)
        self.trees = [self.repo]
        for name in ("wt-a", "wt-b"):
            self.add_worktree(root / name, install=False)
        self.live: set[Path] = set()

    def add_worktree(self, path: Path, install: bool = True) -> Path:
        git("worktree", "add", "-q", "-b", path.name, str(path), cwd=self.repo)
        self.trees.append(path)
        if install and self.manager.per_worktree:
            self.manager.install(path)
        return path

    def install_manager(self) -> None:
        for wt in self.trees if self.manager.per_worktree else self.trees[:1]:
            self.manager.install(wt)

    def gitlease(self, *args: str, cwd: Path | None = None):
        return run_cli(*args, cwd=cwd or self.repo, env={"PATH": env()["PATH"]})

    def hook_files(self, trees: list[Path] | None = None) -> dict[str, tuple[bytes, int]]:
        """Every file of every hooks folder: path -> (bytes, mode)."""
        out = {}
        for wt in self.trees if trees is None else trees:
            folder = wt / git("rev-parse", "--git-path", "hooks", cwd=wt).stdout.strip()
            for p in sorted(folder.rglob("*")) if folder.is_dir() else []:
                if p.is_file():
                    out[str(p)] = (p.read_bytes(), p.stat().st_mode)
        return out

    # -------------------------------------------------------------- what a worktree does

    def commit(self, wt: Path, *extra: str, text: str = "") -> tuple[bool, str]:
        (wt / ".stage-check").write_text(f"{text}\n")
        (wt / "change.txt").write_text(f"{time.time_ns()}\n")
        git("add", ".stage-check", "change.txt", cwd=wt)
        result = run("git", "commit", "-qm", "change", *extra, cwd=wt, check=False)
        if result.returncode != 0:
            git("reset", "-q", cwd=wt)
        return result.returncode == 0, result.stdout + result.stderr

    def merge(self, wt: Path) -> tuple[bool, str]:
        """A merge commit (the side commit is made with plumbing: no hook runs for it)."""
        tree = git("rev-parse", "HEAD^{tree}", cwd=wt).stdout.strip()
        side = git("commit-tree", tree, "-p", "HEAD", "-m", "side", cwd=wt).stdout.strip()
        result = run("git", "merge", "--no-ff", "--no-edit", side, cwd=wt, check=False)
        if result.returncode != 0:
            git("merge", "--abort", cwd=wt, check=False)
        return result.returncode == 0, result.stdout + result.stderr

    def in_effect(self, wt: Path) -> bool:
        """What `gitlease hooks status` answers here (asked in this process: it is asked
        often, and the command's exit code is tested by `detected` and in test_hooks.py)."""
        from gitlease.hooks.install import commit_check

        found = commit_check(wt)
        assert found is not None
        return found.in_effect

    def enforced(self, trees: list[Path], phase: str) -> None:
        """In each worktree: live commits, lapsed refused (plain, --no-verify, merge), and the
        manager's own hook refuses the marker."""
        where = f"{self.manager.name}, {phase}"

        def live(wt: Path) -> None:
            assert self.in_effect(wt), f"{where}: {wt} status"
            if wt not in self.live:
                got = self.gitlease("acquire", f"live/{wt.name}", "--ttl", "10m", "--json", cwd=wt)
                assert got.code == 0 and got.json["commit_check"]["in_effect"], (where, got)
                assert "NOT checked" not in got.err, (where, got.err)
                self.live.add(wt)
            ok, out = self.commit(wt)
            assert ok, f"{where}: {wt}: a live claim commits:\n{out}"
            ok, out = self.commit(wt, text=MARKER)
            assert not ok and self.manager.refusal in out, f"{where}: {wt}: the marker:\n{out}"

        def lapse(wt: Path) -> None:
            got = self.gitlease("acquire", f"lapse/{wt.name}", "--ttl", "1s", cwd=wt)
            assert got.code == 0, (where, got)

        def refused(wt: Path) -> None:
            for extra in ((), ("--no-verify",)):
                ok, out = self.commit(wt, *extra)
                assert not ok and "commit refused" in out, f"{where}: {wt} {extra}:\n{out}"
            ok, out = self.merge(wt)
            assert not ok and "commit refused" in out, f"{where}: {wt}: merge:\n{out}"
            assert self.gitlease("unbind", f"lapse/{wt.name}", cwd=wt).code == 0

        each(trees, live)
        each(trees, lapse)
        time.sleep(1.1)  # every lapse claim (TTL 1 s) was written before this
        each(trees, refused)

    def still_refused(self, trees: list[Path], phase: str) -> None:
        """Checked here (status), and a lapsed claim's commit is refused."""
        where = f"{self.manager.name}, {phase}"

        def lapse(wt: Path) -> None:
            assert self.in_effect(wt), f"{where}: {wt} status"
            assert self.gitlease("acquire", f"again/{wt.name}", "--ttl", "1s", cwd=wt).code == 0

        def refused(wt: Path) -> None:
            ok, out = self.commit(wt)
            assert not ok and "commit refused" in out, f"{where}: {wt}:\n{out}"

        each(trees, lapse)
        time.sleep(1.1)
        each(trees, refused)

    def detected(self, wt: Path, phase: str) -> None:
        """Not checked here, and gitlease says so: status exits 6, acquire warns."""
        where = f"{self.manager.name}, {phase}"
        status = run_cli("hooks", "status", "--json", cwd=wt)
        assert status.code == 6 and status.json["problems"] and status.json["fix"], (where, status)
        got = self.gitlease("acquire", f"probe/{wt.name}", "--json", cwd=wt)
        assert got.code == 0, (where, got)
        assert got.json["commit_check"]["in_effect"] is False, (where, got.json)
        assert "NOT checked" in got.err and "fix:" in got.err, (where, got.err)
        assert self.gitlease("release", f"probe/{wt.name}", cwd=wt).code == 0
        ok, out = self.commit(wt, text=MARKER)
        assert not ok and self.manager.refusal in out, f"{where}: {wt}: the marker:\n{out}"

    def not_enforced(self, trees: list[Path], phase: str) -> None:
        """After uninstall: a lapsed claim commits; the manager's own hook still runs."""
        where = f"{self.manager.name}, {phase}"

        def lapse(wt: Path) -> None:
            self.gitlease("release", f"live/{wt.name}", cwd=wt)
            self.live.discard(wt)
            assert self.gitlease("acquire", f"gone/{wt.name}", "--ttl", "1s", cwd=wt).code == 0

        def commits(wt: Path) -> None:
            ok, out = self.commit(wt)
            assert ok, f"{where}: {wt}: gitlease no longer checks:\n{out}"
            ok, out = self.commit(wt, text=MARKER)
            assert not ok and self.manager.refusal in out, f"{where}: {wt}: the marker:\n{out}"
            assert self.gitlease("unbind", f"gone/{wt.name}", cwd=wt).code == 0

        each(trees, lapse)
        time.sleep(1.1)
        each(trees, commits)


def each(trees: list[Path], work: Callable[[Path], None]) -> None:
    """``work`` in every worktree at once (each is independent; this keeps the suite short)."""
    if not trees:
        return
    with ThreadPoolExecutor(max_workers=len(trees)) as pool:
        for future in [pool.submit(work, wt) for wt in trees]:
            future.result()


# ------------------------------------------------------------------ the scenarios


def managers(request: pytest.FixtureRequest, name: str, native: bool = False) -> Manager:
    if name == "pre-commit":
        return pre_commit(native)
    if name == "lefthook":
        return lefthook(native)
    return husky(request.getfixturevalue("husky_modules"), native)


# ~60 commits through the manager's hooks: 20 s on an idle machine, over 300 s (the suite's
# hang bound) at load 35, so its own bound is longer
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", ["pre-commit", "lefthook", "husky"])
def test_gitlease_install_next_to_a_manager(name: str, request, tmp_path: Path) -> None:
    """First install, the manager's reinstall, gitlease's reinstall, uninstall."""
    scene = Scene(tmp_path, managers(request, name))
    scene.install_manager()
    before = scene.hook_files()

    # 1. First install: every present worktree is checked, the manager's hooks still run.
    first = scene.gitlease("hooks", "install", "--json")
    assert first.code == 0, first
    assert all(w["in_effect"] for w in first.json["worktrees"]), first.json
    scene.enforced(scene.trees, "first install")
    # A worktree added later: checked, or acquire there says it is not, with the fix.
    later = scene.add_worktree(tmp_path / "wt-later")
    before.update(
        (path, data)
        for path, data in scene.hook_files([later]).items()
        if Path(path).is_relative_to(later)  # its own hooks folder (husky's), if it has one
    )
    if not scene.in_effect(later):
        scene.detected(later, "a worktree added later")
        assert scene.gitlease("hooks", "install").code == 0, "the fix it names"
    scene.enforced([later], "a worktree added later")

    # 2. The manager's reinstall keeps the check, or gitlease detects that it is gone.
    scene.install_manager()
    kept = [wt for wt in scene.trees if scene.in_effect(wt)]
    each([wt for wt in scene.trees if wt not in kept], lambda wt: scene.detected(wt, "reinstall"))
    if kept:
        scene.enforced(kept, "the manager's reinstall kept the check")

    # 3. gitlease's reinstall recovers without manual steps, and again changes nothing.
    again = scene.gitlease("hooks", "install")
    assert again.code == 0, again
    settled = scene.hook_files()
    assert scene.gitlease("hooks", "install").code == 0
    assert scene.hook_files() == settled, "install is idempotent"
    scene.enforced(scene.trees, "gitlease's reinstall")

    # 4. Uninstall restores exactly the manager's hooks; nothing of gitlease's enforces.
    gone = scene.gitlease("hooks", "uninstall")
    assert gone.code == 0, gone
    assert scene.hook_files() == before
    scene.not_enforced(scene.trees, "uninstall")

    # And uninstall right after the manager's reinstall (which moved gitlease's hook to
    # .legacy or .old, or overwrote it) leaves nothing of gitlease's running either.
    assert scene.gitlease("hooks", "install").code == 0
    scene.install_manager()
    assert scene.gitlease("hooks", "uninstall").code == 0
    assert scene.hook_files() == before
    assert not any(b"gitlease-managed-hook" in data for data, _ in scene.hook_files().values())


@pytest.mark.parametrize("name", ["pre-commit", "lefthook", "husky"])
def test_the_native_way(name: str, request, tmp_path: Path) -> None:
    """The how-to page's snippet for each manager: checked in every worktree, and it lasts."""
    scene = Scene(tmp_path, managers(request, name, native=True))
    scene.install_manager()
    if name == "pre-commit":
        # The framework cannot install git am's hooks: gitlease adds them, and leaves alone
        # the framework's hooks that already run the check.
        got = scene.gitlease("hooks", "install", "--json")
        assert got.code == 0, got
        states = {h["hook"]: h["state"] for h in got.json["hooks"]}
        assert states == {
            "pre-commit": "native",
            "prepare-commit-msg": "native",
            "pre-merge-commit": "native",
            "applypatch-msg": "installed",
            "pre-applypatch": "installed",
        }
    if name == "husky":
        # A worktree where husky has not run yet runs no hook at all: gitlease says so.
        bare = scene.add_worktree(tmp_path / "wt-no-husky", install=False)
        scene.trees.remove(bare)
        got = scene.gitlease("acquire", "probe/x", "--json", cwd=bare)
        assert got.code == 0 and got.json["commit_check"]["in_effect"] is False, got
        assert "npx husky" in got.json["commit_check"]["fix"] and "npx husky" in got.err
    scene.add_worktree(tmp_path / "wt-later")
    scene.enforced(scene.trees, "native")
    scene.install_manager()
    scene.still_refused(scene.trees, "native, after the manager's reinstall")


def test_the_shipped_pre_commit_manifest_is_valid() -> None:
    """`.pre-commit-hooks.yaml`, the hook the framework installs from gitlease's repository."""
    exe = tool("pre-commit")
    result = run(exe, "validate-manifest", ROOT / ".pre-commit-hooks.yaml", cwd=ROOT, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    text = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert "id: gitlease-claim" in text
    assert "stages: [pre-commit, prepare-commit-msg, pre-merge-commit]" in text
