"""Reading git: finding git dirs, one snapshot of the refs, `git cat-file --batch`."""
