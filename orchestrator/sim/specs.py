"""What a family's actors act with and see: its action and observation specs.

A family declares both (`BenchmarkFamily.action_spec`, `.observation_spec`); the runner
publishes them in each observation, the manifest records them, and the viewer, the
exports and the replay read recorded actions and images by them. The core holds no
family's values: LIBERO's are in `benchmarks/libero/`.

The mailbox protocol a family's actors speak must be able to carry its specs: version 1
(`mailroom.observation/v1`, `mailroom.response/v1`) fixes a 7-number action in [-1, 1]
for an OSC_POSE controller, at least one camera, and proprioception as 7 joint positions
and 2 gripper positions. A family of another shape is refused when it is registered
(`protocol_v1_problems`), until a protocol version that carries it exists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mailroom.mailbox.action_dimension import ACTION_DIMENSION

# What version 1 of the mailbox protocol fixes (its frozen schemas say the same).
V1_DIMENSION = ACTION_DIMENSION
V1_BOUNDS = (-1.0, 1.0)
V1_CONTROLLER = "OSC_POSE"
V1_PROPRIO = (("joint_pos", 7), ("gripper_qpos", 2))
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


@dataclass(frozen=True)
class ActionSpec:
    """An action vector: its components in order (`layout`), each in [`low`, `high`], for
    the `controller` the simulator runs at `control_hz` controls a second."""

    layout: tuple[str, ...]
    low: float
    high: float
    controller: str
    control_hz: int

    @property
    def dimension(self) -> int:
        return len(self.layout)


@dataclass(frozen=True)
class ObservationSpec:
    """What an observation delivers: one square PNG (`image_size` pixels a side) per
    camera in `cameras`; with `--proprio`, the named proprioception fields of the given
    lengths. An episode starts after `settling_controls` controls the actor never sees."""

    cameras: tuple[str, ...]
    image_size: int
    settling_controls: int
    proprio: tuple[tuple[str, int], ...]


def protocol_v1_problems(action: ActionSpec, observation: ObservationSpec) -> list[str]:
    """What in the specs version 1 of the mailbox protocol cannot carry (empty: all)."""
    problems = []
    if action.dimension != V1_DIMENSION:
        problems.append(f"an action of {action.dimension} numbers (v1 carries {V1_DIMENSION})")
    if (action.low, action.high) != V1_BOUNDS:
        problems.append(f"bounds [{action.low}, {action.high}] (v1 carries [-1, 1])")
    if action.controller != V1_CONTROLLER:
        problems.append(f"controller {action.controller!r} (v1 carries {V1_CONTROLLER!r})")
    if action.control_hz <= 0:
        problems.append(f"a control rate of {action.control_hz} Hz")
    if not observation.cameras:
        problems.append("no camera (v1 delivers at least one image)")
    if len(set(observation.cameras)) != len(observation.cameras) or not all(
        _NAME.match(c) for c in observation.cameras
    ):
        problems.append(f"camera names {list(observation.cameras)} (distinct, lowercase words)")
    if observation.image_size < 1:
        problems.append(f"an image size of {observation.image_size}")
    if observation.proprio != V1_PROPRIO:
        problems.append(f"proprioception {list(observation.proprio)} (v1 carries {V1_PROPRIO})")
    if observation.settling_controls < 0:
        problems.append(f"{observation.settling_controls} settling controls")
    return problems
