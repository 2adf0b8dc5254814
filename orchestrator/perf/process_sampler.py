"""Samples this process's descendants from /proc: workers apart from actors.

For the parked section of the benchmark: how a worker's resident memory grows with its
live episodes, and what the actors hold beside it. Bubblewrap's processes and everything
under them are an actor's; a Python process started by multiprocessing is a worker.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

_PROC = Path("/proc")
_PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20
_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Sample:
    t: float
    workers_mb: float
    actors_mb: float
    actors: int  # actor programs running (each live episode has one)


def children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may hold spaces: the ppid follows it.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def _rss_mb(pid: int) -> float:
    try:
        return int((_PROC / str(pid) / "statm").read_text().split()[1]) * _PAGE_MB
    except (OSError, ValueError, IndexError):
        return 0.0


def _cmdline(pid: int) -> str:
    try:
        return (_PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _program(pid: int) -> str:
    return _cmdline(pid).split(" ", 1)[0]


def sample(root: int | None = None) -> Sample:
    """One look: workers' and actors' resident memory, and the actors running. An actor
    is the first process under a sandbox's bubblewrap processes that is not one itself
    (its own children count in its memory); a worker is a multiprocessing child."""
    children = children_map()
    workers = actors_mb = 0.0
    actors = 0
    todo = list(children.get(root or os.getpid(), []))
    while todo:
        pid = todo.pop()
        program = _program(pid)
        if program.endswith("bwrap"):
            actors_mb += _rss_mb(pid)
            for child in children.get(pid, []):
                if _program(child).endswith("bwrap"):
                    todo.append(child)
                else:
                    actors += 1
                    actors_mb += sum(_rss_mb(p) for p in [child, *below(children, child)])
            continue
        if "spawn_main" in _cmdline(pid):
            workers += _rss_mb(pid)
        todo.extend(children.get(pid, []))
    return Sample(time.monotonic(), workers, actors_mb, actors)


def below(children: dict[int, list[int]], root: int) -> list[int]:
    """Every process under `root` (not `root` itself)."""
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def rss_mb(pid: int) -> float:
    """A process's resident set (0 once it is gone)."""
    return _rss_mb(pid)


def program(pid: int) -> str:
    """The first word of a process's command line ("" once it is gone)."""
    return _program(pid)


def cpu_s(pid: int, *, reaped: bool = True) -> float:
    """A process's CPU seconds, user and system, with those of the children it reaped
    unless `reaped` is False (0 once it is gone)."""
    try:
        fields = (_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(f) for f in fields[11 : 15 if reaped else 13]) / _TICKS
    except (OSError, ValueError, IndexError):
        return 0.0


@dataclass
class ProcessSampler:
    """Samples every `interval_s` on a thread of its own while in use."""

    interval_s: float = 2.0
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> ProcessSampler:
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.samples.append(sample())


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of y over x (None with fewer than two distinct x)."""
    if len({x for x, _ in points}) < 2:
        return None
    fit = statistics.linear_regression([x for x, _ in points], [y for _, y in points])
    return float(fit.slope)
