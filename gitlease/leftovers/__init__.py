"""Leftovers of earlier work in a worktree: bindings whose claims are no longer this
worktree's (docs/concepts.md, bindings)."""
