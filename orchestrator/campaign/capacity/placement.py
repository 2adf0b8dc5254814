"""A Ray cluster's nodes: how many workers of S slots each places, and the widest S.

A worker of S slots takes S of its node's `mailroom_slot` resources and the memory its
live episodes are estimated to need (`worker_memory_mb`, from memory admission's
defaults); once placed, its own admission still starts a new live episode only while
its node's memory keeps the margin. The nodes are read by the Ray executor
(`cluster/executor.py`); what they place is decided here, with no Ray.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mailroom.orchestrator.campaign.capacity.memory import (
    FIRST_SIMULATOR_MB,
    FURTHER_SIMULATOR_MB,
    PARKED_EPISODE_MB,
)
from mailroom.orchestrator.sim.parked import Holding

SLOT_RESOURCE = "mailroom_slot"


def worker_memory_mb(slots: int, holding: Holding = "dedicated") -> float:
    """The memory a worker of `slots` live episodes asks Ray for (admission's defaults):
    a simulator each when dedicated; when parked, one task's two simulators and a small
    share per episode (its actor and its parked state); the worker's own admission then
    builds more only while its node's memory keeps the margin."""
    if holding == "parked" and slots > 1:  # a worker of one slot keeps its simulator
        return FIRST_SIMULATOR_MB + FURTHER_SIMULATOR_MB + slots * PARKED_EPISODE_MB
    return FIRST_SIMULATOR_MB + (slots - 1) * FURTHER_SIMULATOR_MB


@dataclass(frozen=True)
class NodeCapacity:
    node_id: str
    address: str
    slots: float
    memory_mb: float

    def workers(self, slots: int, holding: Holding = "dedicated") -> int:
        by_memory = int(self.memory_mb // worker_memory_mb(slots, holding))
        return min(int(self.slots // slots), by_memory)


def widest_slots(
    nodes: Sequence[NodeCapacity], workers: int, holding: Holding, at_most: int
) -> int:
    """The most slots, up to `at_most`, with which `nodes` still place `workers` workers
    (1 if none do: the launch's check then says why)."""
    low, high = 1, max(1, at_most)
    while low < high:  # a node places fewer workers the more slots each has
        mid = (low + high + 1) // 2
        if sum(n.workers(mid, holding) for n in nodes) >= workers:
            low = mid
        else:
            high = mid - 1
    return low


def placement_refusal(
    nodes: Sequence[NodeCapacity], workers: int, slots: int, holding: Holding = "dedicated"
) -> str | None:
    """Why `nodes` cannot place `workers` workers of `slots` slots each, or None."""
    fits = sum(n.workers(slots, holding) for n in nodes)
    if fits >= workers:
        return None
    declared = ", ".join(
        f"{n.address} {n.slots:g} slot(s) {n.memory_mb / 1024:.1f} GiB" for n in nodes
    )
    return (
        f"the cluster places {fits} worker(s) of {slots} slot(s), not {workers}: each "
        f"needs {slots} {SLOT_RESOURCE} and "
        f"{worker_memory_mb(slots, holding) / 1024:.1f} GiB "
        f"of Ray memory on one node (nodes: {declared or 'none'}); start nodes with "
        f"ray start --resources='{{\"{SLOT_RESOURCE}\": N}}'"
    )
