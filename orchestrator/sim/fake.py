"""A `Simulator` with no simulator behind it, outside the production path.

For measuring the orchestrator's own code path (`perf/decision_overhead.py`) and for
tests of pure runner, transport and recording logic (the golden signature test). It
steps no physics and renders nothing, so it backs no claim about the simulator: its
frames are synthetic and deterministic (each depends on the seed, the initial state and
the controls executed so far), and it succeeds only where told to (`succeed_at`, a
control number), never by itself.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from mailroom.orchestrator.sim.base import (
    Capture,
    ControlOutcome,
    EpisodeStart,
    Image,
    SimulatorError,
    TaskIdentity,
)
from mailroom.orchestrator.sim.specs import ObservationSpec

FAKE_INSTRUCTION = "put both the cream cheese box and the butter in the basket"
# The fake stands for the default family's simulator (its identities name `libero`), so
# by default it delivers what that family's observation spec says; a test keeps the two
# equal. Another family's fake passes its own spec.
FAKE_OBSERVATION = ObservationSpec(
    cameras=("agentview", "robot0_eye_in_hand"),
    image_size=256,
    settling_controls=10,
    proprio=(("joint_pos", 7), ("gripper_qpos", 2)),
    camera_transform="image[::-1, ::-1]",
)


def fake_identity(
    suite: str = "libero_10", task_index: int = 0, task_order_index: int = 0
) -> TaskIdentity:
    """An identity named for the case, with no files behind it."""
    return TaskIdentity(
        benchmark="libero",
        suite=suite,
        task_index=task_index,
        task_order_index=task_order_index,
        task_name=f"fake-{suite}-{task_index}",
        instruction=FAKE_INSTRUCTION,
        bddl_path=Path("fake.bddl"),
        init_states_path=Path("fake.init"),
        bddl_sha256="0" * 64,
        init_states_sha256="0" * 64,
        n_init_states=50,
    )


FAKE_IDENTITY = fake_identity()


def _synthetic_image(camera: int, control: int, size: int) -> Image:
    """A smooth gradient shifted by the control count: compressible like a real frame."""
    row = (np.arange(size, dtype=np.uint16) + 3 * control + 85 * camera) % 256
    image = np.empty((size, size, 3), dtype=np.uint8)
    image[..., 0] = row[None, :]
    image[..., 1] = row[:, None]
    image[..., 2] = (control * 7 + camera * 40) % 256
    return image


def synthetic_capture(control: int, observation: ObservationSpec = FAKE_OBSERVATION) -> Capture:
    size = observation.image_size
    images = {
        name: _synthetic_image(i, control, size) for i, name in enumerate(observation.cameras)
    }
    return Capture(images=images, joint_pos=None, gripper_qpos=None)


def synthetic_state(control: int) -> tuple[float, ...]:
    """The arm's 7 joint and 2 finger positions after `control` controls: each moves a
    little every control, so that a state can be told from the one before it."""
    joints = tuple(round(0.1 * j + 0.01 * control, 6) for j in range(7))
    return (*joints, round(0.04 - 0.001 * control, 6), round(-0.04 + 0.001 * control, 6))


class FakeSimulator:
    """Implements `sim.base.Simulator` and `Parkable` (its episode is two counters);
    executes nothing.

    `frames`, when given, replaces the synthetic capture (a benchmark hands over one
    prepared capture to measure the orchestrator alone); `succeed_at` makes native
    success true from that executed control on (1-based), for tests of success paths;
    `step_s` holds each control that long, standing for physics and rendering (a test
    of serving several live episodes needs a simulator that keeps the worker busy).
    """

    def __init__(
        self,
        *,
        control_cap: int,
        proprio: bool = False,
        frames: Callable[[], Capture] | None = None,
        succeed_at: int | None = None,
        observation: ObservationSpec = FAKE_OBSERVATION,
        step_s: float = 0.0,
    ) -> None:
        self.control_cap = control_cap
        self.proprio = proprio
        self.record_frames = False
        self._frames = frames
        self._succeed_at = succeed_at
        self._observation = observation
        self._controls = 0
        self._seed = 0
        self._step_s = step_s
        self._scene = ""

    def _capture(self) -> Capture:
        if self._frames is not None:
            return self._frames()
        capture = synthetic_capture(self._seed + self._controls, self._observation)
        if not self.proprio:
            return capture
        state = synthetic_state(self._controls)
        return dataclasses.replace(capture, joint_pos=state[:7], gripper_qpos=state[7:])

    def set_control_cap(self, control_cap: int) -> None:
        self.control_cap = control_cap

    def resolve_task(self, suite: str, task_index: int, task_order_index: int) -> TaskIdentity:
        return fake_identity(suite, task_index, task_order_index)

    def start_episode(
        self, identity: TaskIdentity, init_state_index: int, seed: int
    ) -> EpisodeStart:
        self._controls = 0
        self._seed = seed % 1000 + init_state_index
        self._scene = f"fake:{identity.task_name}"
        state = hashlib.sha256(f"{identity.task_name}/{init_state_index}".encode()).hexdigest()
        return EpisodeStart(
            identity=identity,
            init_state_index=init_state_index,
            seed=seed,
            state_sha256=state,
            settling_controls=self._observation.settling_controls,
            success_during_settling=False,
            capture=self._capture(),
        )

    def step(self, action: Sequence[float], *, observe: bool) -> ControlOutcome:
        if self._step_s > 0:
            time.sleep(self._step_s)
        self._controls += 1
        success = self._succeed_at is not None and self._controls >= self._succeed_at
        capture = self._capture() if observe or self.record_frames else None
        return ControlOutcome(
            success=success,
            capture=capture if observe else None,
            state=synthetic_state(self._controls) if self.proprio else None,
            frames=capture.images if capture is not None and self.record_frames else None,
        )

    @property
    def scene_key(self) -> str:
        return self._scene

    def park(self, *, verify: bool = False) -> object:
        return (self._scene, self._seed, self._controls)

    def unpark(self, parked: object) -> None:
        if not isinstance(parked, tuple) or parked[0] != self._scene:
            raise SimulatorError("a parked episode goes back only into its own scene")
        _, self._seed, self._controls = parked

    def detach(self) -> None:
        return None

    def close(self) -> None:
        return None
