"""Child processes must not outlive the process that started them."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from collections.abc import Callable

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4


def stay_dumpable() -> None:
    """Linux: undo the kernel's `dumpable = 0` after a change of user.

    A process that drops from root to another uid is made non-dumpable, which leaves its
    own `/proc/self/fd` owned by root: bubblewrap, started as the sandbox's uid, could
    then not bind the descriptors it is handed. Only processes of that fresh uid (the
    sandbox itself) gain anything from it.
    """
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 1) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")


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
