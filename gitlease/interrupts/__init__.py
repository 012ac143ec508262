"""Interrupts after a write: SIGINT and SIGTERM never leave a claim behind an exit code that
says the command failed (docs/reference/exit-codes.md)."""
