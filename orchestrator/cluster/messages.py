"""What a cluster worker sends its driver, in order, through `ClusterWorker.drain`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class WorkerReport:
    """One report of the worker's live episodes, as the local executor's queue carries
    it: `(kind, case_id, attempt, *details)`."""

    payload: tuple[Any, ...]


@dataclass(frozen=True)
class EventLines:
    """Lines just appended to an attempt's event log. With a `token`, the worker waits
    for `ClusterWorker.ack(token)`: the driver has them on disk before the actor is
    shown an observation."""

    attempt_id: str
    lines: tuple[str, ...]
    token: int | None = None


@dataclass(frozen=True)
class EvidenceChunk:
    """A piece of one file of a finished attempt's evidence; `final` closes the file."""

    attempt_id: str
    path: str  # relative to the attempt's directory, POSIX separators
    data: bytes
    final: bool


@dataclass(frozen=True)
class WantsWork:
    """The worker has a free slot and nothing queued."""


Message = WorkerReport | EventLines | EvidenceChunk | WantsWork
