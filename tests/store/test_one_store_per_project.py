"""One project, one store: clones by every spelling git accepts share it, two servers on one
host by port are two projects, ``open_store`` refuses a project path given as the store, one
clone's config never pins the coordinator of every clone, and a repository path that is not
UTF-8 is USAGE (docs/reliability.md, "Truth, round three").
"""

from __future__ import annotations

import os
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


def test_two_servers_on_one_host_by_port_are_two_projects(tmp_path: Path) -> None:
    """``http://10.211.0.1:5000/claims`` and ``:6000/claims`` are two repositories on two
    servers: two projects, two stores; the scheme's default port is no port at all."""
    from gitlease.store.projects import normalize_url

    assert normalize_url("http://10.211.0.1:5000/claims") != normalize_url(
        "http://10.211.0.1:6000/claims"
    )
    assert normalize_url("ssh://git@github.com:22/acme/shop") == normalize_url(
        "git@github.com:acme/shop"
    ) == normalize_url("https://github.com/Acme/Shop.git") == normalize_url(
        "https://github.com:443/acme/shop"
    )  # fmt: skip
    assert normalize_url("http://h:80/x") == normalize_url("http://h/x")
    assert normalize_url("git://h:9418/x") == normalize_url("git://h/x")
    clones = []
    for port in (5000, 6000):
        c = make_repo(tmp_path / f"c{port}")
        git("remote", "add", "origin", f"http://10.211.0.1:{port}/claims", cwd=c)
        clones.append(c)
    wheres = [run_cli("where", "--json", cwd=c).json for c in clones]
    assert wheres[0]["store"] != wheres[1]["store"], wheres
    assert wheres[0]["project"] == "10.211.0.1:5000/claims"
    assert run_cli("acquire", "p/1", "--ttl", "1m", cwd=clones[0]).code == 0
    assert run_cli("acquire", "p/1", "--ttl", "1m", cwd=clones[1]).code == 0


def test_open_store_refuses_a_project_path_given_as_the_store(repo: Path, tmp_path: Path) -> None:
    """``gitlease.open_store(path)`` with a working repository's path used that repository
    as the store, splitting from the CLI's shared store (a double grant). It is USAGE now,
    naming the fix; ``cwd=path``, the shared store itself, and ``gitlease.store .`` work."""
    import gitlease
    from gitlease.errors import UsageError

    took = run_cli("acquire", "s/1", "--ttl", "5m", "--json", cwd=repo)
    assert took.code == 0, took
    for given in (repo, str(repo), repo / ".git"):
        with pytest.raises(UsageError) as refused:
            gitlease.open_store(given)
        assert "cwd=" in str(refused.value) and "working repository" in str(refused.value)
        assert refused.value.exit_code == 2
    via_cli = run_cli("--store", str(repo), "acquire", "s/1", "--json", cwd=tmp_path)
    assert via_cli.code == 2, via_cli
    store = gitlease.open_store(cwd=repo)
    assert gitlease.show(store, "s/1").record.claim_id == took.json["claim_id"]
    shared = gitlease.open_store(store.location.git_dir)
    assert gitlease.show(shared, "s/1").record.claim_id == took.json["claim_id"]
    own = make_repo(tmp_path / "own")
    git("config", "gitlease.store", ".", cwd=own)
    assert gitlease.open_store(own).location.git_dir == (own / ".git").resolve()


def test_one_clones_config_never_pins_the_coordinator_of_every_clone(
    seed: Path, tmp_path: Path
) -> None:
    """A copy with the same origin and ``gitlease.remote=<elsewhere>`` ran ``list`` once, and
    every other clone then pushed its claims there. Now that copy is refused (7) until the
    coordinator is recorded deliberately (``gitlease remote set``); ``where`` and ``remote
    show`` then say who recorded it and when, and every clone uses it."""
    shop = _bare(seed, tmp_path / "shop.git")
    a, b = _clone(str(shop), tmp_path / "a"), _clone(str(shop), tmp_path / "b")
    rogue = _clone(str(shop), tmp_path / "rogue")
    elsewhere = tmp_path / "elsewhere.git"
    git("init", "-q", "--bare", str(elsewhere), cwd=tmp_path)
    git("remote", "add", "elsewhere", str(elsewhere), cwd=rogue)
    git("config", "gitlease.remote", "elsewhere", cwd=rogue)
    listed = run_cli("list", "--json", cwd=rogue)
    assert listed.code == 7 and "gitlease remote set" in listed.json["error"]["message"], listed
    assert run_cli("where", "--json", cwd=a).json["remote"] is None
    assert run_cli("acquire", "g/1", "--ttl", "1m", cwd=a).code == 0
    assert git("--git-dir", str(elsewhere), "for-each-ref", cwd=tmp_path).stdout == ""
    shown = run_cli("remote", "show", "--json", cwd=b)
    assert shown.code == 0 and shown.json["recorded"] is None, shown
    assert run_cli("release", "g/1", cwd=a).code == 0

    made = run_cli("remote", "set", "elsewhere", "--json", cwd=rogue)
    assert made.code == 0, made
    doc = run_cli("where", "--json", cwd=b).json
    assert doc["remote_url"] == str(elsewhere), doc
    rec = doc["remote_recorded"]
    assert "gitlease remote set" in rec["by"] and str(rogue) in rec["by"] and rec["at"], rec
    assert rec["by"] in doc["remote_reason"] and rec["at"] in doc["remote_reason"]
    text = run_cli("remote", "show", cwd=b)
    assert rec["by"] in text.out and rec["at"] in text.out, text
    assert run_cli("acquire", "g/2", "--ttl", "1m", cwd=b).code == 0
    assert "g/2" in git("--git-dir", str(elsewhere), "for-each-ref", cwd=tmp_path).stdout
    again = run_cli("remote", "set", str(shop), "--json", cwd=a)
    assert again.code == 7 and "--replace" in again.json["error"]["message"], again


def test_a_repository_whose_path_is_not_utf8_is_never_an_error(tmp_path: Path) -> None:
    """Refused as USAGE, naming the path and the fix (it used to be exit 1 everywhere)."""
    from conftest import make_repo, run_cli

    parent = Path(os.fsdecode(bytes(tmp_path) + b"/not-utf8-\xff"))
    repo = make_repo(parent / "repo")
    for args in (["list"], ["acquire", R], ["release", R], ["hooks", "install"], ["where"]):
        got = run_cli(*args, cwd=repo)
        assert got.code == 2 and "unexpected error" not in got.err, (args, got)
        assert "not UTF-8" in got.err and "\\xff" in got.err, (args, got.err)
    assert not (repo / ".git" / "worklease").exists(), "nothing written"
