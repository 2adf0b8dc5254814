"""The adapter's interface with no simulator behind it.

For measuring the orchestrator's own code path (`orchestrator/perf/decision_overhead.py`) and for
tests of pure runner logic. It executes nothing and never succeeds, so it backs no
claim about the simulator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from mailroom.orchestrator.sim.libero import (
    SETTLING_CONTROLS,
    Capture,
    ControlOutcome,
    EpisodeStart,
    LiberoAdapter,
    TaskIdentity,
)

STAND_IN_IDENTITY = TaskIdentity(
    benchmark="libero",
    suite="libero_10",
    task_index=0,
    task_order_index=0,
    task_name="stand-in",
    instruction="put both the cream cheese box and the butter in the basket",
    bddl_path=Path("stand-in.bddl"),
    init_states_path=Path("stand-in.init"),
    bddl_sha256="0" * 64,
    init_states_sha256="0" * 64,
    n_init_states=1,
)


class StandInAdapter(LiberoAdapter):
    """Hands over `frames()` wherever the real adapter would hand over a capture."""

    def __init__(self, control_cap: int, frames: Callable[[], Capture]) -> None:
        super().__init__(control_cap=control_cap)
        self._frames = frames

    def start_episode(
        self, identity: TaskIdentity, init_state_index: int, seed: int
    ) -> EpisodeStart:
        return EpisodeStart(
            identity=identity,
            init_state_index=init_state_index,
            seed=seed,
            state_sha256="0" * 64,
            settling_controls=SETTLING_CONTROLS,
            success_during_settling=False,
            capture=self._frames(),
        )

    def step(self, action: Sequence[float], *, observe: bool) -> ControlOutcome:
        return ControlOutcome(success=False, capture=self._frames() if observe else None)

    def close(self) -> None:
        return None
