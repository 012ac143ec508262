"""Files shipped with gitlease as package data, read through :mod:`importlib.resources`: the
git hook programs (``gitlease-hook``, ``gitlease-pre-receive``) and the agent skill
(``SKILL.md``). Nothing here is imported as code."""
