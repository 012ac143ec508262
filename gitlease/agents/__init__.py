"""Inside the agent harnesses: hooks that deny an edit the claim no longer covers.

Claude Code, Codex and Gemini CLI run a command before each file edit and at session start,
with a JSON payload on stdin. ``gitlease.agents.hook`` answers them in each harness's own
format: it denies an edit of a file whose worktree lost its claim (the commit hooks'
judgement, :func:`gitlease.hooks.check.worktree_problems`), and tells the model at session
start which claims it holds. ``gitlease agents install`` writes the harness's settings.
See docs/howto/agent-harnesses.md.
"""
