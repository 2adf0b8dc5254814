"""Runs many episodes as one run: launch and resume, workers, the manifest, interruptions."""
