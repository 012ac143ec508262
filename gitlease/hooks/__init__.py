"""The git hooks: the commit check, installing hooks, finding hook folders, inspecting what runs
there."""
