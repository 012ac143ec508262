"""Fenced pushes: the Gitlease-Claim trailer, the push check, its report, the server's pre-
receive hook. `python -m gitlease.fence` runs the hook."""
