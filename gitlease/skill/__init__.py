"""The agent skill shipped with gitlease: ``SKILL.md``, printed by ``gitlease skill``."""
