"""What a transport is handed to publish, kept small: one 8x8 camera, no proprioception,
LIBERO's action layout (for the transport's tests, which need no simulator)."""

from __future__ import annotations

import secrets

import numpy as np
from mailroom.mailbox.messages import ActionSpec, Feedback, PublicCounters
from mailroom.orchestrator.sim.base import Capture
from mailroom.orchestrator.transport.base import Delivery

CAPTURE = Capture(
    images={"agentview": np.zeros((8, 8, 3), dtype=np.uint8)}, joint_pos=None, gripper_qpos=None
)
SPEC = ActionSpec(
    layout=["dx", "dy", "dz", "droll", "dpitch", "dyaw", "gripper"],
    control_hz=20,
    replan_interval=5,
    max_chunk=5,
)


def small_delivery(sequence: int, feedback: Feedback | None = None) -> Delivery:
    """Observation `sequence` of an episode of 10 policy calls, a fresh request id."""
    return Delivery(
        sequence=sequence,
        request_id=secrets.token_hex(16),
        instruction="an instruction",
        capture=CAPTURE,
        action_spec=SPEC,
        counters=PublicCounters(
            policy_calls=sequence - 1,
            max_policy_calls=10,
            executed_controls=0,
            max_controls=50,
            rejected_responses=0,
        ),
        feedback=feedback,
    )
