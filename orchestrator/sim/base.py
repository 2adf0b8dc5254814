"""The `Simulator` Protocol every adapter implements, with the types it shares.

What an adapter's actions and images are (layout, cameras, image size, settling, control
rate) its family declares (`sim/specs.py`).

The runner and the episode depend on `Simulator` only, and the coordinator's workers
build theirs with a `SimulatorFactory` (LIBERO's unless told otherwise); `libero.py`
implements it on the real LIBERO stack and `fake.py` without a simulator. A new
benchmark is a family of the registry (`orchestrator/families/`, `docs/families.md`): its
simulator factory is one of the things it declares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
from mailroom.orchestrator.records.result import ResultSimulator, SimulatorHolding

Image = npt.NDArray[np.uint8]


class SimulatorError(RuntimeError):
    """A native simulator failure: always a terminal infrastructure error."""


class NotParkableError(RuntimeError):
    """An episode whose state a simulator cannot take out whole: it runs alone."""


@dataclass(frozen=True)
class TaskIdentity:
    """A task as the simulator builds it: its files, their hashes and the instruction.

    Resolved from a case's suite and task index; the runner hands it to the simulator,
    and a result's `CaseRecord` is made from it. Private: never shown to an actor.
    """

    benchmark: str
    suite: str
    task_index: int
    task_order_index: int
    task_name: str
    instruction: str
    bddl_path: Path
    init_states_path: Path
    bddl_sha256: str
    init_states_sha256: str
    n_init_states: int
    # A family's own change to its base task's scene (a LIBERO-Plus perturbation),
    # read only by that family's adapter.
    perturbation: object | None = None


@dataclass(frozen=True)
class Capture:
    """One sensor capture as the actor receives it (transformed, contiguous)."""

    images: dict[str, Image]
    joint_pos: tuple[float, ...] | None
    gripper_qpos: tuple[float, ...] | None


@dataclass(frozen=True)
class EpisodeStart:
    identity: TaskIdentity
    init_state_index: int
    seed: int
    state_sha256: str
    settling_controls: int
    success_during_settling: bool
    capture: Capture


@dataclass(frozen=True)
class ControlOutcome:
    success: bool
    capture: Capture | None
    # 7 arm + 2 gripper encoders after the control, when the proprio track is on.
    state: tuple[float, ...] | None = None
    # Both cameras after the control, when frames are recorded for video.
    frames: dict[str, Image] | None = None


class Simulator(Protocol):
    """One simulator at a time, reused across episodes of the same task.

    `control_cap` is the most controls an episode may execute (the runner checks it
    against its own budget before anything starts); with `record_frames` every executed
    control returns both cameras' frames for video evidence.
    """

    control_cap: int
    record_frames: bool

    def set_control_cap(self, control_cap: int) -> None: ...

    def resolve_task(self, suite: str, task_index: int, task_order_index: int) -> TaskIdentity:
        """The task's identity, with its files checked against the frozen catalog."""
        ...

    def start_episode(
        self, identity: TaskIdentity, init_state_index: int, seed: int
    ) -> EpisodeStart:
        """Seed, reset, install the initial state, settle; the first capture."""
        ...

    def step(self, action: Sequence[float], *, observe: bool) -> ControlOutcome:
        """One native control of a validated action; a capture only when `observe`."""
        ...

    def detach(self) -> None:
        """Give up what ties the simulator to the calling thread (a renderer's context
        current here), so that another thread may use it next. A worker starts episodes
        on one thread and serves them on another."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class GoalProbe(Protocol):
    """A simulator that can say which of its task's goal predicates hold now. For
    post-episode diagnostics only: never a score, never shown to an actor."""

    def goal_predicates(self) -> list[tuple[str, bool]]:
        """Each goal predicate of the task (as its definition names it) and whether it
        holds in the current state."""
        ...


@runtime_checkable
class Parkable(Protocol):
    """A simulator whose running episode can be taken out as values and put back, so
    that many episodes of one task share it (`sim.parked`). What a parked episode is,
    is the simulator's own business; it goes back only where `scene_key` is the same."""

    @property
    def scene_key(self) -> str: ...

    def park(self, *, verify: bool = False) -> object:
        """The running episode as values; with `verify`, checked whole (when it starts):
        `NotParkableError` says it cannot be taken out."""
        ...

    def unpark(self, parked: object) -> None: ...


@runtime_checkable
class HeldSimulator(Protocol):
    """A simulator that says how it holds its episode (`parked` or `dedicated`, None
    before a start); a simulator that does not say is held `dedicated`."""

    @property
    def holding(self) -> SimulatorHolding | None: ...


def simulator_holding(simulator: object, *, started: bool) -> ResultSimulator:
    """How `simulator` held its episode, for the result ("none" before a start); a
    simulator that does not say holds it `dedicated`."""
    held = simulator.holding if isinstance(simulator, HeldSimulator) else "dedicated"
    return held if started and held is not None else "none"


class SimulatorFactory(Protocol):
    """Builds a worker's simulator: a module-level callable, so it crosses a process spawn."""

    def __call__(self, *, control_cap: int, proprio: bool) -> Simulator: ...
