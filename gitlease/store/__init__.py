"""Where claims live: the local store (compare-and-swap on a ref), the remote store (atomic
pushes), locating a project's store, the coordinator, push replies."""
