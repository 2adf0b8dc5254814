"""The `claude_code` method profile: Claude Code as a confined actor, and its trace parser."""
