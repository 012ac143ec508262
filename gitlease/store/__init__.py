"""Where claims live: the contract of every store (base), the store on this host (local), the
store coordinated through a git remote (remote), locating a project's store, the coordinator."""
