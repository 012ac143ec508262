"""Small helpers every layer may use: files (one atomic write), text, processes, immutable
values, digests, and the test-only switches."""

#: False when the code runs, True to type checkers (mypy and pyright take any name
#: ``TYPE_CHECKING`` in an ``if`` so). The modules the commit check loads take it from
#: here rather than from ``typing``, whose import costs every commit about 2.5 ms
#: (tests/hooks/test_hook_processes.py keeps ``typing`` out of the check).
TYPE_CHECKING = False
