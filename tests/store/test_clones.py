"""One host, one truth: clones of one project share one store with no configuration.

Real clones made with `git clone` of a local bare repository, and of repositories whose
`origin` names a remote host (set with `git remote set-url`, since there is no network):
the https and ssh spellings of one GitHub repository are one project. See
docs/reference/store.md (which store is used).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from commits import commit
from conftest import clock_ahead, git, make_repo, run_cli
from racing import race

R = "github/acme/shop/12"


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """A bare repository on this host: the project everyone clones."""
    seed = make_repo(tmp_path / "seed")
    bare = tmp_path / "shop.git"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    git("push", "-q", str(bare), "main", cwd=seed)
    return bare


def clone(source: Path | str, path: Path) -> Path:
    git("clone", "-q", str(source), str(path), cwd=path.parent)
    return path


def where(cwd: Path) -> dict:
    got = run_cli("where", "--json", cwd=cwd)
    assert got.code == 0, got
    return got.json


def test_clones_of_a_local_bare_repository_share_claims(shop: Path, tmp_path: Path) -> None:
    a, b = clone(shop, tmp_path / "a"), clone(shop, tmp_path / "b")
    held = run_cli("acquire", R, "--ttl", "1m", "--json", cwd=a)
    assert held.code == 0, held

    second = run_cli("acquire", R, "--json", cwd=b)
    assert second.code == 3, "the second clone must not be granted a held unit"
    assert second.json["error"]["claim"]["claim_id"] == held.json["claim_id"]

    assert where(a)["store"] == where(b)["store"]
    assert where(a)["project"] == f"file://{shop.resolve()}"
    assert run_cli("list", "--json", cwd=b).json["claims"][0]["claim_id"] == held.json["claim_id"]

    assert run_cli("release", R, cwd=a).code == 0
    taken = run_cli("acquire", R, "--json", cwd=b)
    assert taken.code == 0 and taken.json["revision"] == 2, taken
    assert run_cli("check", R, cwd=a).code == 4, "a knows it holds nothing"


def test_clones_of_one_remote_url_in_any_spelling_share_claims(tmp_path: Path) -> None:
    spellings = [
        "https://github.com/Acme/Shop.git",
        "git@github.com:acme/shop.git",
        "ssh://git@github.com:22/acme/shop",
        "https://github.com/acme/shop/",
    ]
    clones = []
    for i, url in enumerate(spellings):
        repo = make_repo(tmp_path / f"c{i}")
        git("remote", "add", "origin", url, cwd=repo)
        clones.append(repo)
    stores = {where(c)["store"] for c in clones}
    assert len(stores) == 1, stores
    assert where(clones[0])["project"] == "github.com/acme/shop"

    assert run_cli("acquire", R, "--ttl", "1m", cwd=clones[0]).code == 0
    for other in clones[1:]:
        assert run_cli("acquire", R, cwd=other).code == 3

    elsewhere = make_repo(tmp_path / "other")
    git("remote", "add", "origin", "https://github.com/acme/api.git", cwd=elsewhere)
    assert where(elsewhere)["store"] not in stores, "another project has its own store"


def test_a_clone_of_a_clone_and_the_original_share_claims(tmp_path: Path) -> None:
    original = make_repo(tmp_path / "original")  # no remote: the project is the repository
    first = clone(original, tmp_path / "first")
    second = clone(first, tmp_path / "second")  # its origin is a clone: followed back
    assert where(original)["store"] == where(first)["store"] == where(second)["store"]
    assert run_cli("acquire", R, "--ttl", "1m", cwd=second).code == 0
    assert run_cli("acquire", R, cwd=original).code == 3


def test_takeover_after_expiry_across_clones(shop: Path, tmp_path: Path) -> None:
    a, b = clone(shop, tmp_path / "a"), clone(shop, tmp_path / "b")
    assert run_cli("acquire", R, "--ttl", "1m", cwd=a).code == 0
    assert run_cli("acquire", R, cwd=b).code == 3
    # B waits out the rest, on a clock moved 55 s on (clock_ahead), and takes it
    taken = run_cli("acquire", R, "--wait", "1m", "--json", cwd=b, env=clock_ahead(55))
    assert taken.code == 0 and taken.json["revision"] == 2, taken
    assert run_cli("heartbeat", R, cwd=a).code == 4, "an expired claim is never revived"


def test_worktrees_of_a_clone_still_share_with_the_other_clones(shop: Path, tmp_path) -> None:
    a, b = clone(shop, tmp_path / "a"), clone(shop, tmp_path / "b")
    wt = tmp_path / "a-wt"
    git("worktree", "add", "-q", "-b", "agent", str(wt), cwd=a)
    assert where(wt)["store"] == where(b)["store"]
    assert run_cli("acquire", R, "--ttl", "1m", cwd=wt).code == 0
    assert run_cli("acquire", R, cwd=a).code == 3
    assert run_cli("acquire", R, cwd=b).code == 3
    assert run_cli("release", R, cwd=wt).code == 0


def test_the_hooks_of_each_clone_refuse_a_lapsed_claim(shop: Path, tmp_path: Path) -> None:
    a, b = clone(shop, tmp_path / "a"), clone(shop, tmp_path / "b")
    for c in (a, b):
        assert run_cli("hooks", "install", cwd=c).code == 0
    from conftest import wait_for

    assert run_cli("acquire", R, "--ttl", "5m", cwd=a).code == 0  # live while it commits
    assert commit(a)[0], "a live claim commits"
    assert run_cli("heartbeat", R, "--ttl", "1s", cwd=a).code == 0  # its last: it lapses
    wait_for(lambda: run_cli("check", R, cwd=a).code == 4, what="the claim to expire")
    ok, err = commit(a)
    assert not ok and "expired" in err
    assert run_cli("acquire", R, "--ttl", "1m", cwd=b).code == 0
    assert commit(b)[0]
    ok, err = commit(a)
    assert not ok and "replaced" in err, "the claim now belongs to the other clone"


def test_a_race_across_three_clones_has_one_winner_per_round(shop: Path, tmp_path: Path) -> None:
    clones = [clone(shop, tmp_path / f"c{i}") for i in range(3)]
    resources = [f"race/{i}" for i in range(8)]
    codes = race([(c, {}) for c in clones], resources, racers=12)
    for resource, got in codes.items():
        assert sorted(got) == [0] + [3] * 11, (resource, got)


def test_git_config_gitlease_store_at_any_scope(shop: Path, tmp_path: Path) -> None:
    a = clone(shop, tmp_path / "a")
    mine = tmp_path / "mine.git"
    git("init", "-q", "--bare", str(mine), cwd=tmp_path)
    git("config", "gitlease.store", str(mine), cwd=a)
    doc = where(a)
    assert doc["store"] == str(mine) and doc["reason"] == "chosen by git config gitlease.store"

    git("config", "--unset", "gitlease.store", cwd=a)
    global_config = Path(os.environ["GIT_CONFIG_GLOBAL"])
    saved = global_config.read_text()
    try:
        git("config", "--global", "gitlease.store", str(mine), cwd=a)
        assert where(a)["store"] == str(mine), "global scope"
        env_store = tmp_path / "env.git"
        git("init", "-q", "--bare", str(env_store), cwd=tmp_path)
        got = run_cli("where", "--json", cwd=a, env={"GITLEASE_STORE": str(env_store)})
        assert got.json["store"] == str(env_store), "GITLEASE_STORE comes first"
        got = run_cli("--store", str(shop), "where", "--json", cwd=a)
        assert got.json["reason"] == "chosen by --store", "--store before everything"
    finally:
        global_config.write_text(saved)

    git("config", "gitlease.store", "../relative.git", cwd=a)
    git("init", "-q", "--bare", str(tmp_path / "relative.git"), cwd=tmp_path)
    assert where(a)["store"] == str((tmp_path / "relative.git").resolve()), "from the top"


def test_where_says_how_to_inspect_the_store_with_git(shop: Path, tmp_path: Path) -> None:
    a = clone(shop, tmp_path / "a")
    before = run_cli("where", "--json", cwd=a).json
    assert before["exists"] is False and not Path(before["store"]).exists()
    assert "not there yet" in run_cli("where", cwd=a).out
    assert run_cli("acquire", R, "--ttl", "1m", cwd=a).code == 0
    doc = where(a)
    assert doc["exists"] is True
    listed = subprocess.run(
        ["bash", "-c", doc["inspect"]], cwd=a, capture_output=True, text=True, check=True
    )
    assert "refs/worklease/github/acme/shop/12.lease" in listed.stdout
    assert f"resource {json.dumps(R)}" in listed.stdout
    assert run_cli("where", "--path", cwd=a).out.strip() == doc["store"]
    text = run_cli("where", cwd=a).out
    assert doc["store"] in text and "shared by every clone" in text and "inspect" in text
    assert "not there yet" not in text


def test_claims_never_ride_along_in_the_project(shop: Path, tmp_path: Path) -> None:
    a = clone(shop, tmp_path / "a")
    got = run_cli("acquire", R, "--ttl", "1m", "--json", cwd=a)
    assert got.code == 0
    blob = got.json["oid"]
    assert git("cat-file", "-e", blob, cwd=a, check=False).returncode != 0, "not in the clone"
    mirror = tmp_path / "mirror.git"
    git("clone", "-q", "--mirror", str(a), str(mirror), cwd=tmp_path)
    assert not git("for-each-ref", "refs/worklease/", cwd=mirror).stdout
    local = clone(a, tmp_path / "local-clone")
    assert git("cat-file", "-e", blob, cwd=local, check=False).returncode != 0


def test_the_default_owner_names_the_worktree(shop: Path, tmp_path: Path) -> None:
    a = clone(shop, tmp_path / "agent-7")
    env = {"GITLEASE_OWNER": ""}
    first = run_cli("acquire", "o/1", "--json", cwd=a, env=env).json["owner"]
    (a / "sub").mkdir()
    second = run_cli("acquire", "o/2", "--json", cwd=a / "sub", env=env)
    assert first.endswith(":agent-7") and "@" in first
    assert second.json["owner"] == first, "stable across calls from one worktree"
    outside = tmp_path / "nowhere"
    outside.mkdir()
    other = run_cli("acquire", "o/3", "--json", cwd=outside, env=env).json["owner"]
    assert other.rsplit(":", 1)[1].isdigit(), "outside a worktree: the pid"


def test_one_coordinator_for_every_clone_of_a_project(shop: Path, tmp_path: Path) -> None:
    """A clone that names the remote records it in the shared store; a clone that names none
    uses it too, and a clone that names another is refused."""
    server = shop  # the bare repository everyone cloned is also the coordinator
    a, b = clone(server, tmp_path / "a"), clone(server, tmp_path / "b")
    git("config", "gitlease.remote", "origin", cwd=a)
    assert run_cli("acquire", R, "--ttl", "1m", cwd=a).code == 0
    assert git("for-each-ref", "refs/worklease/", cwd=server).stdout, "pushed to the remote"

    doc = where(b)
    assert doc["remote_url"] == str(server) and "recorded" in doc["remote_reason"]
    assert run_cli("acquire", R, cwd=b).code == 3

    other = tmp_path / "other.git"
    git("init", "-q", "--bare", str(other), cwd=tmp_path)
    git("remote", "add", "elsewhere", str(other), cwd=b)
    git("config", "gitlease.remote", "elsewhere", cwd=b)
    refused = run_cli("acquire", "x/1", "--json", cwd=b)
    assert refused.code == 7 and "coordinated through" in refused.json["error"]["message"]


def test_from_inside_a_git_hook_the_store_is_found_and_made_as_anywhere(tmp_path: Path) -> None:
    """A git hook exports GIT_DIR, GIT_INDEX_FILE and (in a push) a quarantine object
    directory: gitlease, run from one, still makes and uses exactly its own store."""
    repo = make_repo(tmp_path / "repo")
    quarantine = tmp_path / "quarantine"
    quarantine.mkdir()
    hook_env = {
        "GIT_DIR": str(repo / ".git"),
        "GIT_INDEX_FILE": str(repo / ".git" / "index"),
        "GIT_OBJECT_DIRECTORY": str(quarantine),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(repo / ".git" / "objects"),
        "GIT_QUARANTINE_PATH": str(quarantine),
    }
    got = run_cli("acquire", R, "--ttl", "1m", "--json", cwd=repo, env=hook_env)
    assert got.code == 0, got
    store = Path(where(repo)["store"])
    assert (store / "objects").is_dir(), "a whole store, not one whose objects went elsewhere"
    assert not any(quarantine.iterdir()), "nothing written to the hook's quarantine"
    assert run_cli("show", R, "--json", cwd=repo).json["claim_id"] == got.json["claim_id"]
    assert run_cli("check", R, cwd=repo, env=hook_env).code == 0


def test_a_store_path_taken_by_something_else_is_a_clear_store_error(shop: Path, tmp_path) -> None:
    a = clone(shop, tmp_path / "a")
    path = Path(where(a)["store"])
    (path / "refs" / "worklease").mkdir(parents=True)  # a hand-made folder, not a repository
    got = run_cli("acquire", R, cwd=a)
    assert got.code == 7, got
    assert "is not a git repository" in got.err and "gitlease.store" in got.err, got.err
    assert "Traceback" not in got.err and (path / "refs" / "worklease").is_dir(), "nothing lost"
