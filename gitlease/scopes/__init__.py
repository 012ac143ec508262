"""Path scopes: claims that reserve files (docs/howto/path-scopes.md).

``wildmatch`` parses scope patterns (git's ``:(glob)`` rules), matches paths and decides
exactly whether two patterns overlap; ``index`` keeps the store's index of live scopes and
makes the acquire-time and commit-time checks.
"""
