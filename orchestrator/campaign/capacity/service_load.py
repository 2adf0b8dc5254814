"""Admission by CPU: a worker admits another live episode only while it keeps up.

With parked episodes memory no longer bounds how many episodes a worker holds live: a
waiting episode is a few kilobytes. What bounds it is the serving thread: each response
costs it the decision's physics and renders (~0.3 s for a LIBERO decision here), and a
response that arrives while it serves another waits. The worker measures, over a recent
window, the share of time its serving thread was busy and how long responses waited
(queueing delay), and admits a new live episode only while both stay under their
limits; `--slots` caps the number regardless.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from mailroom.measures import percentile

WINDOW_S = 60.0
# Admission stops above these: a busier thread makes responses wait in turn.
MAX_BUSY_SHARE = 0.75
MAX_QUEUE_DELAY_P95_MS = 1000.0
# Too few waits in the window say nothing about its p95.
MIN_WAITS = 20


@dataclass
class ServiceLoad:
    """The serving thread's recent busy spans and responses' waits, in monotonic s."""

    window_s: float = WINDOW_S
    max_busy_share: float = MAX_BUSY_SHARE
    max_queue_delay_p95_ms: float = MAX_QUEUE_DELAY_P95_MS
    _busy: deque[tuple[float, float]] = field(default_factory=deque)
    _waits: deque[tuple[float, float]] = field(default_factory=deque)
    held_back: int = 0

    def served(self, started: float, ended: float, arrived: float | None) -> None:
        """One look at an episode from `started` to `ended`; `arrived`, when the
        response it served arrived (its wait is `started - arrived`)."""
        self._busy.append((started, ended))
        if arrived is not None:
            self._waits.append((ended, max(0.0, started - arrived) * 1000.0))
        self._forget(ended)

    def _forget(self, now: float) -> None:
        since = now - self.window_s
        while self._busy and self._busy[0][1] < since:
            self._busy.popleft()
        while self._waits and self._waits[0][0] < since:
            self._waits.popleft()

    def busy_share(self, now: float) -> float:
        self._forget(now)
        since = now - self.window_s
        busy = sum(end - max(start, since) for start, end in self._busy if end > since)
        return busy / self.window_s

    def queue_delay_p95_ms(self, now: float) -> float | None:
        self._forget(now)
        if len(self._waits) < MIN_WAITS:
            return None
        return percentile([wait for _, wait in self._waits], 0.95)

    def keeps_up(self, now: float) -> bool:
        """Whether one more live episode may be admitted now."""
        waits = self.queue_delay_p95_ms(now)
        slow = waits is not None and waits > self.max_queue_delay_p95_ms
        ok = not slow and self.busy_share(now) < self.max_busy_share
        if not ok:
            self.held_back += 1
        return ok
