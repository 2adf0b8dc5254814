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


@contextlib.contextmanager
def simulator_chatter_to_stderr() -> Iterator[None]:
    """LIBERO prints progress to stdout; keep stdout clean for `--json` documents."""
    with contextlib.redirect_stdout(sys.stderr):
        yield
