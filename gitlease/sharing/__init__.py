"""A store several users write: ``core.sharedRepository`` honoured for every file gitlease
makes in it, as git honours it for the files git makes (docs/reference/store.md)."""
