"""Which git directory a receipt or binding file belongs to (gitlease/gitio/layout.py): the
answer a copied working copy is told apart by, so it must agree with what the file's parent
folders say, for any path at all.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from gitlease.gitio import layout


def _by_parents(path: Path) -> Path | None:
    """The rule, read off ``path.parents`` one by one (the slow way)."""
    for parent in path.parents:
        if parent.name in ("receipts", "bindings") and parent.parent.name == layout.FOLDER:
            return parent.parent.parent
    return None


_PART = st.sampled_from(["receipts", "bindings", layout.FOLDER, ".git", "a", ".", "..", "x.json"])


@given(st.booleans(), st.lists(_PART, max_size=8))
def test_the_git_dir_of_a_file_is_what_its_parents_say(absolute: bool, parts: list[str]) -> None:
    path = Path("/" if absolute else "", *parts)
    assert layout.is_worktree_file(path) == _by_parents(path)


def test_a_receipt_names_the_git_dir_above_its_folder() -> None:
    receipt = Path("/w/.git", layout.FOLDER, "receipts", "0123456789abcdef", "c-1.json")
    assert layout.is_worktree_file(receipt) == Path("/w/.git")
    assert layout.is_worktree_file(Path("/w/.git/elsewhere/c-1.json")) is None
