"""Keeping claims alive for an agent: starting a keeper process, and the process."""
