"""The one error of this room: an installed benchmark package is missing, or one of its
files cannot be read or trusted. An episode records it as a simulator failure."""

from __future__ import annotations


class PackageError(RuntimeError):
    """An installed benchmark package is missing or not as this project expects it."""
