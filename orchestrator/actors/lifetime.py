"""Makes child processes die with the process that started them (the parent-death signal)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Linux: SIGKILL this process when its parent exits (even by SIGKILL).

    If the parent is already gone (it died between our start and this call, so the
    kernel will never signal us), exit at once instead.
    """
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:
        os._exit(137)


def die_with_this_process() -> Callable[[], None]:
    """A `preexec_fn` for children of the calling process."""
    parent = os.getpid()
    return lambda: die_with_parent(parent)
