"""The holder's side: receipts (the token), their directory, explicit paths, and the worktree's
bindings."""
