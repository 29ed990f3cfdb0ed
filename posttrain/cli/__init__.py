"""The command line: the same verbs as the MCP tools, for a person or a shell-driven agent,
with `--json` output. `app.py` is the typer app; each command group has its own module."""
