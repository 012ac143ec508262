"""The MCP server (``gitlease mcp``): the commands as tools for an agent's harness.

See docs/howto/mcp.md and docs/design.md (the MCP server). :mod:`.tools` is the tool
table, :mod:`.renewal` renews the claims taken through the server while it runs,
:mod:`.capture` gives each call its own stdout, :mod:`.server` speaks the protocol.
"""
