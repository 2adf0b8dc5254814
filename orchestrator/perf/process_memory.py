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


def _status_mb(field: str) -> float | None:
    try:
        for line in _STATUS.read_text(encoding="ascii").splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def rss_mb() -> float:
    """This process's resident set now, in MiB (0 where /proc cannot say)."""
    return _status_mb("VmRSS") or 0.0


def peak_rss_mb() -> float:
    """This process's own peak resident set, in MiB."""
    peak = _status_mb("VmHWM")
    if peak is not None:
        return peak
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
