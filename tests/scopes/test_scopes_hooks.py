"""The commit hooks and path scopes: real ``git commit`` and ``git merge`` through hooks
installed with ``gitlease hooks install``, from two worktrees of one repository."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import git

from gitlease.scopes.lookup import foreign_scope_problems, staged_changes


def _write(worktree: Path, name: str, text: str = "x\n") -> None:
    path = worktree / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _commit(worktree: Path, *extra: str, message: str = "change") -> tuple[bool, str]:
    result = git("commit", "-qm", message, *extra, cwd=worktree, check=False)
    return result.returncode == 0, result.stderr


def _stage(worktree: Path, name: str, text: str) -> None:
    _write(worktree, name, text)
    git("add", "-A", cwd=worktree)


def test_a_commit_into_another_claims_scope_is_refused(cli, worktrees) -> None:
    a, b = worktrees
    _stage(b, "src/auth/old.py", "old\n")
    assert _commit(b)[0]  # no scopes yet: commits freely
    assert cli("hooks", "install", cwd=a).code == 0
    got = cli("acquire", "auth", "--paths", "src/auth/**", "--json", cwd=a)
    assert got.code == 0, got
    claim_id = got.json["claim_id"]

    # b touches a file in a's scope: refused, naming the claim, its holder and the path
    _stage(b, "src/auth/login.py", "b's edit\n")
    ok, err = _commit(b)
    assert not ok, err
    assert "commit refused" in err and "src/auth/login.py" in err and claim_id in err
    assert "test-agent" in err and "auth" in err and "gitlease who" in err
    ok, err = _commit(b, "--no-verify")
    assert not ok and "prepare-commit-msg" in err  # --no-verify does not skip it
    git("reset", "-q", "--hard", cwd=b)
    git("clean", "-qfd", cwd=b)

    # outside the scope: fine
    _stage(b, "src/main.py", "main\n")
    assert _commit(b)[0]

    # deleting and renaming from a scoped path are changes too
    git("rm", "-q", "src/auth/old.py", cwd=b)
    ok, err = _commit(b)
    assert not ok and "src/auth/old.py" in err
    git("reset", "-q", "--hard", cwd=b)
    (b / "lib").mkdir(exist_ok=True)
    git("mv", "src/auth/old.py", "lib/old.py", cwd=b)
    assert staged_changes(b) == ["src/auth/old.py", "lib/old.py"]
    ok, err = _commit(b)
    assert not ok and "src/auth/old.py" in err, err
    git("reset", "-q", "--hard", cwd=b)
    # ... and renaming into one
    git("mv", "src/main.py", "src/auth/main.py", cwd=b)
    ok, err = _commit(b)
    assert not ok and "src/auth/main.py" in err, err
    git("reset", "-q", "--hard", cwd=b)

    # the holder's own worktree commits in its own scope
    _stage(a, "src/auth/login.py", "a's edit\n")
    ok, err = _commit(a)
    assert ok, err

    # once released, the scope reserves nothing
    assert cli("release", "auth", cwd=a).code == 0
    _stage(b, "src/auth/login.py", "b's edit\n")
    ok, err = _commit(b)
    assert ok, err


def test_a_merge_bringing_in_a_scoped_path_is_refused(cli, worktrees) -> None:
    a, b = worktrees
    assert cli("hooks", "install", cwd=a).code == 0
    git("checkout", "-q", "-b", "feature", cwd=b)
    _stage(b, "docs/auth.md", "doc\n")
    assert _commit(b)[0]
    git("checkout", "-q", "agent-b", cwd=b)
    _stage(b, "other.txt", "other\n")
    assert _commit(b)[0]  # so the merge is not a fast-forward
    assert cli("acquire", "docs", "--paths", "docs/", cwd=a).code == 0
    result = git("merge", "-q", "--no-edit", "feature", cwd=b, check=False)
    assert result.returncode != 0, result
    assert "pre-merge-commit" in result.stderr and "docs/auth.md" in result.stderr
    git("merge", "--abort", cwd=b)
    assert cli("release", "docs", cwd=a).code == 0
    assert git("merge", "-q", "--no-edit", "feature", cwd=b, check=False).returncode == 0


def test_foreign_scope_problems_is_the_shared_check(cli, worktrees) -> None:
    a, b = worktrees
    got = cli("acquire", "web", "--paths", "web/*.js", "--json", cwd=a)
    assert got.code == 0
    b_git_dir = Path(git("rev-parse", "--absolute-git-dir", cwd=b).stdout.strip())
    a_git_dir = Path(git("rev-parse", "--absolute-git-dir", cwd=a).stdout.strip())
    problems = foreign_scope_problems(b_git_dir, ["web/app.js", "web/lib/x.js", "README"])
    assert len(problems) == 1 and "web/app.js" in problems[0]
    assert got.json["claim_id"] in problems[0] and "test-agent" in problems[0]
    assert foreign_scope_problems(a_git_dir, ["web/app.js"]) == []  # bound: its own
    assert foreign_scope_problems(b_git_dir, []) == []
    odd = foreign_scope_problems(b_git_dir, ["web/a\nb.js"])  # git allows it in a name
    assert len(odd) == 1 and "web/a\\nb.js" in odd[0]  # (shown escaped)
    assert foreign_scope_problems(b_git_dir, ["/abs", "../x"]) == []  # never a repository file
    # a hook written in a few lines passes the git dir as git prints it: a string
    assert foreign_scope_problems(str(b_git_dir), ["web/app.js"]) == problems[:1]
    # an index that cannot be read is made afresh from the records: never blind
    from conftest import store_path

    from gitlease.scopes.index import index_path

    index_path(store_path(a)).write_text("not an index")
    problems = foreign_scope_problems(b_git_dir, ["web/app.js"])
    assert len(problems) == 1 and got.json["claim_id"] in problems[0]


def test_who(cli, repo) -> None:
    assert cli("acquire", "one", "--paths", "src/**", "--json").code == 0
    assert cli("acquire", "two", "--paths", "docs/a.md", "--json").code == 0
    doc = cli("who", "src/x.py", "docs/a.md", "README", "--json")
    assert doc.code == 0, doc
    by_path = {p["path"]: [c["resource"] for c in p["claims"]] for p in doc.json["paths"]}
    assert by_path == {"src/x.py": ["one"], "docs/a.md": ["two"], "README": []}
    text = cli("who", "src/x.py", "README").out
    assert "src/x.py  one" in text and "README  (no live claim" in text
    assert cli("who", "/etc/passwd", "--json").code == 2
    assert cli("release", "one").code == 0
    after = cli("who", "src/x.py", "--json").json
    assert after["paths"] == [{"path": "src/x.py", "claims": []}]


def test_paths_given_from_a_subfolder_are_read_from_the_top_and_it_is_said(cli, repo) -> None:
    """`who app.py` in src/ asks of the top's app.py (paths are top-relative, as a scope is
    written); the answer "free" is not left unexplained: a note names src/app.py."""
    (repo / "src").mkdir()
    assert cli("acquire", "one", "--paths", "src/app.py").code == 0
    from_top = cli("who", "src/app.py")
    assert "one" in from_top.out and "note:" not in from_top.err, from_top
    below = cli("who", "app.py", "--json", cwd=repo / "src")
    assert below.code == 0 and below.json["paths"] == [{"path": "app.py", "claims": []}]
    assert "give src/app.py" in below.err, below
    taken = cli("acquire", "two", "--paths", "app.py", cwd=repo / "src")
    assert taken.code == 0 and "give src/app.py" in taken.err, taken
    for given in ("src/app.py", "**/app.py"):  # read the same from the top: no note
        assert "note:" not in cli("who", given, cwd=repo / "src").err, given


def test_clones_sharing_a_store_check_each_others_scopes(cli, tmp_path: Path) -> None:
    """Two clones of one project share one store: a commit in one clone, bound to nothing,
    is refused for a file in a scope taken from the other (the hook's fast path finds the
    store through the note `hooks install` left)."""
    from conftest import make_repo

    seed = make_repo(tmp_path / "seed")
    shop = tmp_path / "shop.git"
    git("clone", "-q", "--bare", str(seed), str(shop), cwd=tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    git("clone", "-q", str(shop), str(a), cwd=tmp_path)
    git("clone", "-q", str(shop), str(b), cwd=tmp_path)
    assert cli("hooks", "install", cwd=b).code == 0
    got = cli("acquire", "api", "--paths", "api/", "--json", cwd=a)
    assert got.code == 0, got
    _stage(b, "api/handler.py", "b\n")
    ok, err = _commit(b)
    assert not ok and got.json["claim_id"] in err, err
    git("reset", "-q", cwd=b)
    (b / "api" / "handler.py").unlink()
    _stage(b, "web/page.html", "b\n")
    ok, err = _commit(b)
    assert ok, err


def test_one_commit_check_locates_the_store_once(cli, worktrees, tmp_path: Path) -> None:
    """One commit check runs one ``git config`` at most, with nothing cached on disk: the
    claim check and the scope check of one commit share the store the claim check opened (a
    bound worktree), and in an unbound one the ``requireClaim`` look, the scope check's
    location of the store and the trailers note share one read of the configuration."""
    a, b = worktrees
    assert cli("acquire", "auth", "--paths", "src/auth/**", cwd=a).code == 0
    for worktree, code in ((a, 0), (b, 1)):
        _stage(worktree, "src/auth/x.py", "x\n")
        trace = tmp_path / f"trace-{worktree.name}"
        # An empty cache of configuration reads: the check must read git's configuration
        # itself, once, whatever the age of the files it depends on.
        empty_cache = tmp_path / f"cache-{worktree.name}"
        result = subprocess.run(
            [sys.executable, "-m", "gitlease.hookcheck", "pre-commit"],
            cwd=worktree,
            env={**os.environ, "GIT_TRACE": str(trace), "XDG_CACHE_HOME": str(empty_cache)},
            capture_output=True,
            text=True,
        )
        assert result.returncode == code, result.stderr
        located = [
            line
            for line in trace.read_text().splitlines()
            if "built-in: git config" in line and "--show-scope" in line
        ]
        assert len(located) == 1, (worktree.name, located)


def test_git_am_of_a_patch_into_another_claims_scope_is_refused(cli, worktrees, tmp_path) -> None:
    """`git am` runs applypatch-msg before the patch is applied (nothing staged to judge) and
    pre-applypatch after: the second must check the scopes, whatever the first one passed."""
    a, b = worktrees
    assert cli("hooks", "install", cwd=a).code == 0
    assert cli("acquire", "owner/1", "--paths", "src/**", cwd=a).code == 0
    assert cli("acquire", "owner/2", cwd=b).code == 0  # (bound: the hooks' pass mark is kept)
    _stage(b, "src/app.py", "from another worktree\n")
    git("-c", "core.hooksPath=/dev/null", "commit", "-qm", "patch", cwd=b)
    patch = tmp_path / "into-scope.patch"
    patch.write_text(git("format-patch", "-1", "--stdout", cwd=b).stdout)
    git("reset", "-q", "--hard", "HEAD~1", cwd=b)
    applied = git("am", "-q", str(patch), cwd=b, check=False)
    assert applied.returncode != 0 and "src/app.py" in applied.stderr, applied
    git("am", "--abort", cwd=b)
    assert "patch" not in git("log", "-1", "--format=%s", cwd=b).stdout


def test_a_gitlink_inside_a_scope_is_seen_though_gitmodules_ignores_it(cli, worktrees) -> None:
    """`submodule.<name>.ignore = all` in .gitmodules (a file outside the scope) must not
    hide a moved gitlink inside it from the check."""
    a, b = worktrees
    assert cli("hooks", "install", cwd=a).code == 0
    assert cli("acquire", "owner/1", "--paths", "src/**", cwd=a).code == 0
    _write(b, ".gitmodules", '[submodule "v"]\n\tpath = src/vendor\n\turl = ./v\n\tignore = all\n')
    git("add", ".gitmodules", cwd=b)
    git("update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},src/vendor", cwd=b)
    ok, err = _commit(b)
    assert not ok and "src/vendor" in err, err


def test_a_remote_added_after_hooks_install_is_followed_to_the_shared_store(
    cli, tmp_path: Path
) -> None:
    """The hook's fast path reads the store from a note `hooks install` left; a remote added
    since makes this repository a clone of another project, whose store holds a scope: the
    commit must be judged against that store, with no gitlease command run in between."""
    from conftest import make_repo

    seed = make_repo(tmp_path / "seed")
    shop = tmp_path / "shop.git"
    git("clone", "-q", "--bare", str(seed), str(shop), cwd=tmp_path)
    a = tmp_path / "a"
    git("clone", "-q", str(shop), str(a), cwd=tmp_path)
    got = cli("acquire", "api", "--paths", "api/", "--json", cwd=a)
    assert got.code == 0, got
    late = tmp_path / "late"
    git("init", "-q", str(late), cwd=tmp_path)
    assert cli("hooks", "install", cwd=late).code == 0
    git("remote", "add", "origin", str(shop), cwd=late)
    git("fetch", "-q", "origin", cwd=late)
    git("checkout", "-q", "-b", "x", "origin/main", cwd=late)
    _stage(late, "api/handler.py", "late\n")
    ok, err = _commit(late)
    assert not ok and got.json["claim_id"] in err, err


def test_a_bracketed_route_folder_is_covered_as_git_covers_it(cli, repo) -> None:
    """`app/[slug]/page.tsx` (a Next.js route) is also compared as the literal path, as git
    compares a pathspec; `app/[slug]/**` reads `[slug]` as a class, as git does, and the
    acquire says so when a folder of that very name is there, naming the escaped form."""
    _write(repo, "app/[slug]/page.tsx")
    assert cli("acquire", "one", "--paths", "app/[slug]/page.tsx").code == 0
    who = cli("who", "app/[slug]/page.tsx", "--json").json["paths"][0]["claims"]
    assert [c["resource"] for c in who] == ["one"]
    assert cli("release", "one").code == 0
    misread = cli("acquire", "two", "--paths", "app/[slug]/**")
    assert misread.code == 0 and "give app/\\[slug\\]/**" in misread.err, misread
    assert cli("release", "two").code == 0
    meant = cli("acquire", "three", "--paths", "app/\\[slug\\]/**")
    assert meant.code == 0 and "note:" not in meant.err, meant
    who = cli("who", "app/[slug]/page.tsx", "--json").json["paths"][0]["claims"]
    assert [c["resource"] for c in who] == ["three"]


def test_a_commit_with_a_store_of_its_own_leaves_the_next_commit_checked(
    cli, worktrees, tmp_path: Path
) -> None:
    """One commit judged against another store (`GITLEASE_STORE`, a documented bypass for
    that commit) must not make the hook's note name that store for every later commit."""
    a, b = worktrees
    assert cli("hooks", "install", cwd=a).code == 0
    assert cli("acquire", "owner/1", "--paths", "src/**", cwd=a).code == 0
    other = {**os.environ, "GITLEASE_STORE": str(tmp_path / "other.git")}
    done = subprocess.run(
        ["git", "commit", "-q", "--allow-empty", "-m", "elsewhere"], cwd=b, env=other
    )
    assert done.returncode == 0
    _stage(b, "src/app.py", "after\n")
    ok, err = _commit(b)
    assert not ok and "src/app.py" in err, err
