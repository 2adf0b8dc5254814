"""The `codex_cli` method profile: Codex CLI as a confined actor, its wrapper and trace parser."""
