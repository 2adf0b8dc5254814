"""Admission by memory: a new live episode starts only while the machine keeps a margin.

A live episode's cost is mostly its simulator: the first one in a worker also pays for
the simulator's imports and the renderer (~2 GB measured here), each further one
~0.5-1.1 GB. Each worker measures what its own simulators cost (resident memory before
and after an episode that built one) and uses the median of what it saw, or these
defaults until it has seen one. An episode that reuses an idle simulator adds only its
actor's small share and is admitted while slots are free.

The margin is a fraction of the machine's memory left available (default 10%).
`--max-memory` caps what the campaign's workers may hold in total, their actors
included (read from the actors' memory cgroups where this machine makes them); each
worker keeps to its share (the cap divided by the number of workers). What a live
actor is expected to hold, and is reserved for it, is `actor_memory.py`'s.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

from mailroom.orchestrator.campaign.capacity.actor_memory import ActorsNow

DEFAULT_MARGIN = 0.10
# Estimates until a worker has measured its own (see LIBERO_FACTS: 2,049 MB for the
# first env of a process, 0.5-1.1 GB for each further one).
FIRST_SIMULATOR_MB = 2100.0
FURTHER_SIMULATOR_MB = 1000.0
# A parked episode's share of its worker (its parked state is ~15 KB; its endpoint's
# buffers, evidence writers and runner are most of it) and a small actor's. An agent
# CLI's own memory is larger: a node's margin, checked before each admission, covers it.
PARKED_EPISODE_MB = 64.0
_MEMINFO = Path("/proc/meminfo")


class MemoryUnknownError(RuntimeError):
    """/proc/meminfo could not be read: admission by memory cannot work here."""


@dataclass(frozen=True)
class MachineMemory:
    total_mb: float
    available_mb: float


def machine_memory(path: Path = _MEMINFO) -> MachineMemory:
    values: dict[str, float] = {}
    try:
        for line in path.read_text(encoding="ascii").splitlines():
            name, _, rest = line.partition(":")
            if name in ("MemTotal", "MemAvailable"):
                values[name] = int(rest.split()[0]) / 1024  # kB
    except (OSError, ValueError, IndexError) as exc:
        raise MemoryUnknownError(f"{path} cannot be read: {exc}") from exc
    if "MemTotal" not in values or "MemAvailable" not in values:
        raise MemoryUnknownError(f"{path} names no MemTotal and MemAvailable")
    return MachineMemory(values["MemTotal"], values["MemAvailable"])


@dataclass(frozen=True)
class MemoryPolicy:
    """What the launch declared: the margin kept free and an optional total cap (MiB)."""

    margin: float = DEFAULT_MARGIN
    max_memory_mb: float | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.margin < 1.0:
            raise ValueError("the memory margin is a fraction in [0, 1)")
        if self.max_memory_mb is not None and self.max_memory_mb <= 0:
            raise ValueError("--max-memory must be positive")


@dataclass(frozen=True)
class Capacity:
    """How many live episodes the machine can hold, as estimated before a launch."""

    live_episodes: int
    usable_mb: float
    first_mb: float
    further_mb: float


def capacity(
    policy: MemoryPolicy, workers: int, slots: int, memory: MachineMemory | None = None
) -> Capacity:
    """Live episodes that fit: each worker's first simulator, then further ones, within
    the memory available above the margin (and the cap), at most `workers * slots`."""
    memory = memory or machine_memory()
    usable = memory.available_mb - policy.margin * memory.total_mb
    if policy.max_memory_mb is not None:
        usable = min(usable, policy.max_memory_mb)
    firsts = min(workers, max(0, int(usable // FIRST_SIMULATOR_MB)))
    further = max(0, int((usable - firsts * FIRST_SIMULATOR_MB) // FURTHER_SIMULATOR_MB))
    live = min(workers * slots, firsts + (further if firsts else 0))
    return Capacity(max(live, 0), max(usable, 0.0), FIRST_SIMULATOR_MB, FURTHER_SIMULATOR_MB)


@dataclass
class Admission:
    """One worker's admission of live episodes that need a new simulator."""

    policy: MemoryPolicy
    workers: int = 1
    first_costs_mb: list[float] = field(default_factory=list)
    further_costs_mb: list[float] = field(default_factory=list)

    def estimate_mb(self, simulators: int) -> float:
        """What one more simulator costs this worker, holding `simulators` already."""
        if simulators == 0:
            seen = self.first_costs_mb
            return statistics.median(seen) if seen else FIRST_SIMULATOR_MB
        seen = self.further_costs_mb
        return statistics.median(seen) if seen else FURTHER_SIMULATOR_MB

    def record(self, simulators_before: int, cost_mb: float) -> None:
        """A new simulator's measured cost (resident memory after its first start)."""
        costs = self.first_costs_mb if simulators_before == 0 else self.further_costs_mb
        costs.append(max(0.0, cost_mb))

    def admits_new_simulator(
        self,
        simulators: int,
        worker_rss_mb: float,
        memory: MachineMemory,
        actors: ActorsNow | None = None,
    ) -> bool:
        """Whether a new simulator, and its episode's actor, fit above the margin and
        within this worker's share (`actors`: the live ones, see `actor_memory.py`)."""
        need = self.estimate_mb(simulators) + (actors.expected_mb if actors else 0.0)
        return self._fits(need, worker_rss_mb, memory, actors)

    def admits_actor(self, worker_rss_mb: float, memory: MachineMemory, actors: ActorsNow) -> bool:
        """Whether one more live actor fits (an episode that builds no simulator)."""
        return self._fits(actors.expected_mb, worker_rss_mb, memory, actors)

    def _fits(
        self,
        need_mb: float,
        worker_rss_mb: float,
        memory: MachineMemory,
        actors: ActorsNow | None,
    ) -> bool:
        reserve = actors.reserve_mb if actors else 0.0
        if memory.available_mb - reserve - need_mb < self.policy.margin * memory.total_mb:
            return False
        cap = self.policy.max_memory_mb
        if cap is None:
            return True
        held = worker_rss_mb + (actors.total_held_mb if actors else 0.0) + reserve
        return held + need_mb <= cap / max(1, self.workers)
