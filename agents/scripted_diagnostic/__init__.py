"""The `scripted_diagnostic` method profile: the built-in diagnostic actor (`actor.py`)."""
