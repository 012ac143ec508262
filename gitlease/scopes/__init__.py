"""Path scopes: claims that reserve files (docs/howto/path-scopes.md).

``syntax`` reads scope patterns (git's ``:(glob)`` rules) into tokens and refuses bad ones;
``wildmatch`` turns them into automata, matches paths and decides exactly whether two
patterns overlap; ``index`` keeps the store's index of live scopes and makes the
acquire-time and commit-time checks; ``lookup`` says which live claims cover a path.
"""
