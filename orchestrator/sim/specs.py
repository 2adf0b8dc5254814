"""What a family's actors act with and see: its action and observation specs.

A family declares both (`BenchmarkFamily.action_spec`, `.observation_spec`); the runner
publishes them in each observation, the manifest records them, and the viewer, the
exports and the replay read recorded actions and images by them. The core holds no
family's values: LIBERO's are in `benchmarks/libero/`.

The mailbox protocol a family's actors speak must be able to carry its specs: version 1
(`mailroom.observation/v1`, `mailroom.response/v1`) fixes a 7-number action in [-1, 1]
for an OSC_POSE controller, at least one camera, and proprioception as 7 joint positions
and 2 gripper positions. A family of that shape speaks v1 (what LIBERO's actors see);
any other speaks v2, whose observation publishes the dimension, bounds and controller
(`protocol_for`). A family neither can carry is refused when it is registered.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from mailroom.mailbox.action_dimension import ACTION_DIMENSION
from mailroom.mailbox.messages_v2 import MAX_DIMENSION
from mailroom.mailbox.protocol import PROTOCOL_V1, PROTOCOL_V2, MailboxProtocol

# What version 1 of the mailbox protocol fixes (its frozen schemas say the same).
V1_DIMENSION = ACTION_DIMENSION
V1_BOUNDS = (-1.0, 1.0)
V1_CONTROLLER = "OSC_POSE"
V1_PROPRIO = (("joint_pos", 7), ("gripper_qpos", 2))
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
# What v2's schema allows a component and a controller to be called.
_COMPONENT = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
_CONTROLLER = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")


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
    camera in `cameras`, made from the simulator's render by `camera_transform` (as a
    manifest records it: `image[::-1, ::-1]` turns it upright, `none` leaves it); with
    `--proprio`, the named proprioception fields of the given lengths. An episode starts
    after `settling_controls` controls the actor never sees."""

    cameras: tuple[str, ...]
    image_size: int
    settling_controls: int
    proprio: tuple[tuple[str, int], ...]
    camera_transform: str


def _shared_problems(action: ActionSpec, observation: ObservationSpec) -> list[str]:
    """What no protocol version carries."""
    problems = []
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
    if observation.settling_controls < 0:
        problems.append(f"{observation.settling_controls} settling controls")
    if not 1 <= len(observation.camera_transform) <= 200:
        problems.append("a camera transform of 1 to 200 characters (`none` for none)")
    return problems


def protocol_v1_problems(action: ActionSpec, observation: ObservationSpec) -> list[str]:
    """What in the specs version 1 of the mailbox protocol cannot carry (empty: all)."""
    problems = _shared_problems(action, observation)
    if action.dimension != V1_DIMENSION:
        problems.append(f"an action of {action.dimension} numbers (v1 carries {V1_DIMENSION})")
    if (action.low, action.high) != V1_BOUNDS:
        problems.append(f"bounds [{action.low}, {action.high}] (v1 carries [-1, 1])")
    if action.controller != V1_CONTROLLER:
        problems.append(f"controller {action.controller!r} (v1 carries {V1_CONTROLLER!r})")
    if observation.proprio != V1_PROPRIO:
        problems.append(f"proprioception {list(observation.proprio)} (v1 carries {V1_PROPRIO})")
    return problems


def protocol_v2_problems(action: ActionSpec, observation: ObservationSpec) -> list[str]:
    """What in the specs version 2 cannot carry (empty: all).

    Proprioception: a capture carries the arm's joint positions and the gripper's (v1's
    two fields), so a v2 family may declare those or none."""
    problems = _shared_problems(action, observation)
    if not 1 <= action.dimension <= MAX_DIMENSION:
        problems.append(f"an action of {action.dimension} numbers (v2: 1 to {MAX_DIMENSION})")
    if len(set(action.layout)) != len(action.layout) or not all(
        _COMPONENT.match(c) for c in action.layout
    ):
        problems.append(f"component names {list(action.layout)} (distinct words)")
    if not (math.isfinite(action.low) and math.isfinite(action.high) and action.low < action.high):
        problems.append(f"bounds [{action.low}, {action.high}] (finite, low below high)")
    if not _CONTROLLER.match(action.controller):
        problems.append(f"controller {action.controller!r} (a word)")
    if observation.proprio and observation.proprio != V1_PROPRIO:
        problems.append(f"proprioception {list(observation.proprio)} (v2 carries {V1_PROPRIO})")
    return problems


def protocol_for(action: ActionSpec, observation: ObservationSpec) -> MailboxProtocol:
    """The mailbox protocol a family of these specs speaks: v1 where it fits (so what
    LIBERO's actors see never changes), otherwise v2 (whose problems the registry refused
    at registration)."""
    if not protocol_v1_problems(action, observation):
        return PROTOCOL_V1
    return PROTOCOL_V2
