"""The probes production code carries: the phase clock, a process's memory, and the
percentile both the benchmark and the campaign's admission read their samples with.

Below every other module of mailroom (it imports only the standard library), so the
simulator, the transport, the runner and the campaign's workers can carry them without
depending on the measurement code in `orchestrator/perf/` that reads them.

The phase clock (`CLOCK`), for the benchmark: off by default, near-free when off. A
decision cycle runs from a claimed response to the next published observation;
phases timed inside it are summed per cycle, so medians are per decision. A transport
that publishes ends the cycle at the publication itself (the runner's own `end_cycle`
after `deliver` is then a no-op): bookkeeping done after it overlaps the actor's work,
and is still sampled per phase.

The memory probes (`rss_mb`, `peak_rss_mb`), for per-worker figures and the campaign's
memory admission. `getrusage(RUSAGE_SELF).ru_maxrss` is not this process's own peak on
Linux: a process started by fork and exec (multiprocessing's spawn, subprocess) inherits
the parent's high-water mark at the fork. A worker spawned by a coordinator that holds a
simulator would report the coordinator's memory. `VmHWM` in /proc/self/status belongs to
the process's own address space.
"""

from __future__ import annotations

import contextlib
import resource
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path


class PhaseClock:
    def __init__(self) -> None:
        self.reset(enabled=False)

    def reset(self, enabled: bool) -> None:
        self.enabled = enabled
        self.samples: dict[str, list[float]] = defaultdict(list)
        self.cycles: list[dict[str, float]] = []
        self._open: dict[str, float] | None = None
        self._last: dict[str, float] | None = None
        self._opened_at = 0.0

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            self.samples[name].append(elapsed)
            # Between cycles (after a publication, while the actor works), a phase is
            # added to the cycle that just ended, outside its `cycle` time.
            target = self._open if self._open is not None else self._last
            if target is not None:
                target[name] = target.get(name, 0.0) + elapsed

    def mark(self, name: str, value: float) -> None:
        if self.enabled:
            self.samples[name].append(value)

    def begin_cycle(self) -> None:
        if self.enabled:
            self._open = {}
            self._opened_at = time.perf_counter()

    def end_cycle(self) -> None:
        if self.enabled and self._open is not None:
            now = time.perf_counter()
            self._open["cycle"] = now - self._opened_at
            self._open["published_at"] = now
            self.cycles.append(self._open)
            self._open, self._last = None, self._open


CLOCK = PhaseClock()


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


def percentile(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of a non-empty sample."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]
