"""A store is made sha1 (libgit2 reads no sha256), even when the first call runs with
``GIT_DEFAULT_HASH=sha256``: that write and every later one work.
"""

from __future__ import annotations

from pathlib import Path

from conftest import git, run_cli


def test_a_store_made_under_git_default_hash_sha256_still_takes_writes(repo: Path) -> None:
    """The first call's environment says GIT_DEFAULT_HASH=sha256: the store is made sha1
    anyway (libgit2 reads no sha256), so that call and every later write work."""
    sha = {"GIT_DEFAULT_HASH": "sha256"}
    first = run_cli("acquire", "h/1", "--ttl", "1m", "--json", cwd=repo, env=sha)
    assert first.code == 0, first
    store = Path(run_cli("where", "--json", cwd=repo).json["store"])
    fmt = git("--git-dir", str(store), "rev-parse", "--show-object-format", cwd=repo)
    assert fmt.stdout.strip() == "sha1"
    for args in (("acquire", "h/2", "--ttl", "1m"), ("release", "h/1"), ("release", "h/2")):
        got = run_cli(*args, cwd=repo, env=sha)
        assert got.code == 0, (args, got)
