"""The `gemini_cli` method profile: Gemini CLI as a confined actor, its wrapper and trace parser."""
