"""Seeing a run: `mailroom view` writes a static HTML site of a run directory."""
