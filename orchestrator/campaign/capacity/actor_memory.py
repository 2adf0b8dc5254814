"""Admission by what actors hold: each live actor's memory, read from its memory cgroup,
and what one more is expected to hold.

An agent CLI grows over its episode (a confined Claude Code held ~157 MB of its cgroup at
its peak in a 6-decision episode here, ten times a parked simulator's share), so the
memory available when an episode starts says little of what its actor will hold. A
worker therefore reserves, for each live actor, the part of its expected share it does
not hold yet, and admits another episode only while that reserve and the new actor's
expected share fit above the margin (and within the worker's part of `--max-memory`).

The expected share starts from the profile's `limits.expected_memory_mb` (recorded with
the profile in the manifest), or from a small actor's share where nothing is declared,
and learns from the episodes that ran: once `LEARN_AFTER` actors ended, it is the largest
peak among the last `REMEMBERED` of them, plus `HEADROOM`. With neither a declared nor a
learned figure, nothing is reserved for the live actors' growth (a small actor's share
is asked of the new one only): a guess for each of hundreds of tiny actors would hold
back more than they ever take. Where this machine makes no memory cgroups (no ceiling
enforced), nothing is read and only the new actor's share is asked for.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.actors.memory_cgroup import ended_actor_peaks, live_actor_memory

MB = 1 << 20
# A small actor's share (the diagnostic actor peaks at ~15 MB of its cgroup here).
SMALL_ACTOR_MB = 32.0
LEARN_AFTER = 3
REMEMBERED = 50
HEADROOM = 1.10


@dataclass(frozen=True)
class ActorsNow:
    """The live actors' memory as read now, and what each is expected to hold."""

    held_mb: tuple[float, ...]  # one per live actor with a cgroup
    expected_mb: float
    expected_why: str
    known: bool = True  # the share was declared or learned (not the default guess)

    @property
    def reserve_mb(self) -> float:
        """What the live actors are expected to take on top of what they hold now."""
        if not self.known:
            return 0.0
        return sum(max(0.0, self.expected_mb - held) for held in self.held_mb)

    @property
    def total_held_mb(self) -> float:
        return sum(self.held_mb)


@dataclass
class ActorShare:
    """One worker's expected share of a live actor, learned as its actors end."""

    declared_mb: float | None = None
    peaks_mb: deque[float] = field(default_factory=lambda: deque(maxlen=REMEMBERED))

    @classmethod
    def declared_in(cls, limits: ActorLimits) -> ActorShare:
        """The share a profile's limits declare (`expected_memory_mb`), none learned yet."""
        declared = limits.expected_memory_mb
        return cls(declared_mb=None if declared is None else float(declared))

    def learn(self, peaks_bytes: list[int]) -> None:
        self.peaks_mb.extend(p / MB for p in peaks_bytes)

    @property
    def known(self) -> bool:
        return self.declared_mb is not None or len(self.peaks_mb) >= LEARN_AFTER

    def expected(self) -> tuple[float, str]:
        """The expected share (MiB) and where it comes from."""
        if len(self.peaks_mb) >= LEARN_AFTER:
            peak = max(self.peaks_mb)
            return peak * HEADROOM, (
                f"learned: the largest cgroup peak of the last {len(self.peaks_mb)} "
                f"actors that ran here ({peak:.0f} MiB) plus {round((HEADROOM - 1) * 100)}%"
            )
        if self.declared_mb is not None:
            return self.declared_mb, "declared by the profile (limits.expected_memory_mb)"
        return SMALL_ACTOR_MB, "a small actor's share: the profile declares none"

    def now(self) -> ActorsNow:
        """Read the live actors' cgroups, learning from those that ended since."""
        self.learn(ended_actor_peaks())
        expected, why = self.expected()
        held = live_actor_memory()
        if held is None:
            return ActorsNow((), expected, why, known=self.known)
        mb = tuple(b / MB for b in held)
        return ActorsNow(mb, expected, why, known=self.known)
