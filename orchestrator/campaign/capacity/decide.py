"""How many live episodes a launch may hold, decided once before anything is written.

On this machine: `--slots auto` is chosen from the plan, the holding, memory and the
kernel's limits (`slots.py`), and the slots are then checked against the kernel's limits
(`kernel.py`), read once for both. On a Ray cluster: `auto` is the most slots the nodes
still place, and the nodes must place every worker (`placement.py`); each node's kernel
has limits of its own, which this machine cannot read. `mailroom launch` and `resume`
ask here through their executor; a refusal says what to change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from mailroom.orchestrator.campaign.capacity.kernel import (
    ACTOR_PROCESSES_PER_EPISODE,
    Launch,
    kernel_slots_that_fit,
    refusal,
)
from mailroom.orchestrator.campaign.capacity.kernel_limits import KernelLimits
from mailroom.orchestrator.campaign.capacity.memory import (
    Capacity,
    MachineMemory,
    MemoryPolicy,
    MemoryUnknownError,
    capacity,
)
from mailroom.orchestrator.campaign.capacity.placement import (
    NodeCapacity,
    placement_refusal,
    widest_slots,
)
from mailroom.orchestrator.campaign.capacity.slots import (
    PARKED_SLOTS_CEILING,
    SlotChoice,
    choose_slots,
)
from mailroom.orchestrator.sim.parked import Holding


@dataclass(frozen=True)
class CapacityRequest:
    """What a launch asks for: its workers and slots (a count, or `auto`), how they hold
    their simulators, the plan's cases, and what it declared of memory and records."""

    workers: int
    slots: int | Literal["auto"]
    holding: Holding
    cases: int
    memory: MemoryPolicy = field(default_factory=MemoryPolicy)
    record_full: bool = True
    inotify: bool = True
    # The processes and threads each live actor may have (`kernel.Launch.actor_tasks`).
    actor_tasks: int = ACTOR_PROCESSES_PER_EPISODE


@dataclass(frozen=True)
class CapacityDecision:
    """The slots each worker has, and what decided them."""

    slots: int
    # How `--slots auto` chose on this machine (None: the launch named its slots, or a
    # cluster's nodes chose them).
    choice: SlotChoice | None = None
    # On this machine: the live episodes memory holds at these slots, or why it is not
    # known (the launch still runs, one live episode at a time where memory says so).
    estimate: Capacity | None = None
    memory_unknown: str | None = None
    # On a cluster: its nodes, which place the workers.
    nodes: tuple[NodeCapacity, ...] = ()


class CapacityRefusal(Exception):
    """The launch's live episodes do not fit; the message says what to change."""


class KernelLimitsRefusal(CapacityRefusal):
    """This machine's kernel limits cannot hold the launch's live episodes."""


class PlacementRefusal(CapacityRefusal):
    """The cluster's nodes cannot place the launch's workers."""


def decide_capacity(
    request: CapacityRequest,
    *,
    nodes: Sequence[NodeCapacity] | None = None,
    limits: KernelLimits | None = None,
    machine: MachineMemory | None = None,
) -> CapacityDecision:
    """The launch's slots, on the Ray cluster whose `nodes` are given, or on this machine
    (None), whose kernel `limits` and `machine` memory are read now unless given.

    Raises `KernelLimitsRefusal` or `PlacementRefusal`."""
    if nodes is not None:
        return _on_cluster(request, nodes)
    if limits is None:
        limits = KernelLimits.read()
    workers, cases = request.workers, request.cases
    choice: SlotChoice | None = None
    slots = request.slots
    if slots == "auto":
        one_each = Launch(
            workers, 1, cases, request.record_full, request.inotify, request.actor_tasks
        )
        choice = choose_slots(
            holding=request.holding,
            workers=workers,
            cases=cases,
            policy=request.memory,
            kernel_fit=kernel_slots_that_fit(one_each, limits),
            memory=machine,
        )
        slots = choice.slots
    launch = Launch(
        workers, slots, cases, request.record_full, request.inotify, request.actor_tasks
    )
    beyond = refusal(launch, limits)
    if beyond is not None:
        raise KernelLimitsRefusal(beyond)
    try:
        estimate = capacity(request.memory, workers, slots, machine)
    except MemoryUnknownError as exc:
        return CapacityDecision(slots, choice, memory_unknown=str(exc))
    return CapacityDecision(slots, choice, estimate=estimate)


def _on_cluster(request: CapacityRequest, nodes: Sequence[NodeCapacity]) -> CapacityDecision:
    slots = request.slots
    if slots == "auto":  # the most that the nodes' slots and memory place
        at_most = max(1, request.cases)
        if request.holding == "parked":
            at_most = min(at_most, PARKED_SLOTS_CEILING)
        slots = widest_slots(nodes, request.workers, request.holding, at_most)
    beyond = placement_refusal(nodes, request.workers, slots, request.holding)
    if beyond is not None:
        raise PlacementRefusal(beyond)
    return CapacityDecision(slots, nodes=tuple(nodes))
