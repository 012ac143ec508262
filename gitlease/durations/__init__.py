"""Durations as people type them: a unit always, several parts allowed (``1h30m``)."""
