"""`--slots auto`: the cap on a worker's live episodes when the launch names none.

The cap is not what decides how many episodes are live: within it a worker admits
another live episode only while its serving thread keeps up (`service_load.py`) and
memory allows (`memory.py`). The cap is chosen so that it never binds before those
do on a machine they were measured on, and never goes past what was verified:

- parked (`--simulators parked`): the plan's cases, at most `PARKED_SLOTS_CEILING`
  and at most what the kernel's limits hold for these workers (`kernel.py`);
- dedicated: a simulator per live episode, so what memory holds per worker, estimated
  before the start as `mailroom launch` prints it (`memory.capacity`), at most the
  kernel's limits.

One case, or one live episode allowed, gives 1: a worker with one slot keeps its
simulator and parks nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mailroom.orchestrator.campaign.capacity.memory import (
    MachineMemory,
    MemoryPolicy,
    MemoryUnknownError,
    capacity,
)
from mailroom.orchestrator.sim.parked import Holding

# 300 live episodes were held by one worker in `tests/stress/test_live_episodes_at_scale.py`
# and 200 by two in the bench's parked section (docs/performance.md); CPU admission
# kept the queueing delay p95 at 249 ms there. Past this the cap is the operator's call.
PARKED_SLOTS_CEILING = 256


@dataclass(frozen=True)
class SlotChoice:
    """The slots chosen and, in words, what chose them."""

    slots: int
    reason: str


def choose_slots(
    *,
    holding: Holding,
    workers: int,
    cases: int,
    policy: MemoryPolicy,
    kernel_fit: int | None,
    memory: MachineMemory | None = None,
) -> SlotChoice:
    """The cap for `--slots auto` (see the module docstring). `kernel_fit` is the live
    episodes per worker the kernel's limits hold (None: not checked, as on Ray);
    `memory` the machine's (None: read now)."""
    cases = max(1, cases)
    bounds: list[tuple[int, str]] = [(cases, f"the plan's {cases} case(s)")]
    if holding == "parked":
        bounds.append((PARKED_SLOTS_CEILING, f"the ceiling of {PARKED_SLOTS_CEILING} parked"))
    else:
        active = max(1, min(workers, cases))
        try:
            fits = capacity(policy, active, slots=cases, memory=memory)
        except MemoryUnknownError:
            bounds.append((1, "memory unknown"))
        else:
            per_worker = max(1, math.ceil(fits.live_episodes / active))
            bounds.append((per_worker, f"memory for about {fits.live_episodes} simulator(s)"))
    if kernel_fit is not None:
        bounds.append((max(1, kernel_fit), "the kernel's limits"))
    slots, why = min(bounds, key=lambda bound: bound[0])
    return SlotChoice(slots, f"--slots auto: {slots} per worker ({why})")
