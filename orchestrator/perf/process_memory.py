"""Peak resident memory of this process, for per-worker figures.

`getrusage(RUSAGE_SELF).ru_maxrss` is not this process's own peak on Linux: a process
started by fork and exec (multiprocessing's spawn, subprocess) inherits the parent's
high-water mark at the fork. A worker spawned by a coordinator that holds a simulator
would report the coordinator's memory. `VmHWM` in /proc/self/status belongs to the
process's own address space.
"""

from __future__ import annotations

import resource
from pathlib import Path

_STATUS = Path("/proc/self/status")


def peak_rss_mb() -> float:
    """This process's own peak resident set, in MiB."""
    try:
        for line in _STATUS.read_text(encoding="ascii").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
