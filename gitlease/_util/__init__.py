"""Small helpers every layer may use: files (one atomic write), text, processes, immutable
values, and the test-only switches."""
