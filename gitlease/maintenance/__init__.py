"""verify, prune and the retention policy."""
