"""Truth, round three (part a): one store under every spelling, any clock, one user or many.

Each test here failed before its fix; the rows are in docs/reliability.md
("Truth, round three"). Real clones, real processes, real users where a test needs them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import git, make_repo, run_cli

R = "shop/issue-1"


def _clone(source: str, path: Path) -> Path:
    git("clone", "-q", source, str(path), cwd=path.parent)
    return path


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "seed")


def _bare(seed: Path, path: Path) -> Path:
    git("init", "-q", "--bare", str(path), cwd=path.parent)
    git("push", "-q", str(path), "main", cwd=seed)
    return path


@pytest.mark.parametrize(
    ("layout", "spellings"),
    [
        ("bare", ["srv/shop.git", "srv/shop", "file://{tmp}/srv/shop", "srv/shop.git/"]),
        ("worktree", ["srv/shop", "srv/shop/.git", "srv/shop/", "file://{tmp}/srv/shop/.git"]),
        ("bare-in-dotgit", ["srv/shop.git/.git", "srv/shop", "srv/shop.git"]),
        ("gitfile", ["srv/shop", "srv/shop/.git", "file://{tmp}/srv/shop"]),
    ],
)
def test_clones_by_every_spelling_git_accepts_share_one_store(
    seed: Path, tmp_path: Path, layout: str, spellings: list[str]
) -> None:
    """``git clone /srv/shop`` finds ``shop/.git``, ``shop``, ``shop.git/.git``, ``shop.git``
    (and a ``.git`` file naming the git dir): every spelling is one project, one store."""
    srv = tmp_path / "srv"
    srv.mkdir()
    if layout == "bare":
        _bare(seed, srv / "shop.git")
    elif layout == "worktree":
        git("clone", "-q", str(seed), str(srv / "shop"), cwd=tmp_path)
    elif layout == "bare-in-dotgit":
        (srv / "shop.git").mkdir()
        _bare(seed, srv / "shop.git" / ".git")
    else:  # a worktree whose .git is a file naming its git dir elsewhere
        git("clone", "-q", "--separate-git-dir", str(tmp_path / "elsewhere.git"), str(seed),
            str(srv / "shop"), cwd=tmp_path)  # fmt: skip
        assert (srv / "shop" / ".git").is_file()
    clones = []
    for n, spelling in enumerate(spellings):
        source = spelling.format(tmp=tmp_path)
        source = source if "://" in source else str(tmp_path / source)
        clones.append(_clone(source, tmp_path / f"c{n}"))
    held = run_cli("acquire", R, "--ttl", "5m", "--json", cwd=clones[0])
    assert held.code == 0, held
    stores = {run_cli("where", "--json", cwd=c).json["store"] for c in clones}
    assert len(stores) == 1, stores
    for other in clones[1:]:
        second = run_cli("acquire", R, "--json", cwd=other)
        assert second.code == 3, (other, second)
