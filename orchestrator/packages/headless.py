"""Headless rendering set-up: MuJoCo through Mesa EGL on the CPU, set before any import."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


def configure_headless_rendering() -> None:
    """A user never has to export these; an explicit choice of theirs is kept."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
    # Mesa's llvmpipe renders these small frames as fast in the calling thread as with
    # a thread per core, and with ~12% less CPU (measured: `mailroom bench` and
    # docs/performance.md); so each simulator process keeps to one core, and two
    # workers on two cores no longer fight over render threads.
    os.environ.setdefault("LP_NUM_THREADS", "0")


@contextlib.contextmanager
def simulator_chatter_to_stderr() -> Iterator[None]:
    """LIBERO prints progress to stdout; keep stdout clean for `--json` documents."""
    with contextlib.redirect_stdout(sys.stderr):
        yield
