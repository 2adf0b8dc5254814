"""The mailbox's observation document equals the pydantic model's, and meets the schema."""

from __future__ import annotations

import dataclasses
import secrets
from pathlib import Path

import numpy as np
import pytest
from mailroom.benchmarks.libero.specs import LIBERO_ACTION
from mailroom.mailbox.endpoint import Endpoint
from mailroom.mailbox.feedback import bounded_feedback
from mailroom.mailbox.messages import (
    ActionSpec,
    Feedback,
    Observation,
    PublicCounters,
    from_json,
    to_document,
)
from mailroom.mailbox.parser import Issue
from mailroom.mailbox.publish import document_bytes
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.sim.base import Capture
from mailroom.orchestrator.transport.base import Delivery
from mailroom.orchestrator.transport.observation import build_observation, observation_document

ACTION_LAYOUT = LIBERO_ACTION.layout

ENDPOINT = Endpoint(Path("/mailbox") / secrets.token_hex(16))
FRAME = np.zeros((256, 256, 3), dtype=np.uint8)
CAMERAS = {"agentview": FRAME, "robot0_eye_in_hand": np.zeros((128, 96, 3), dtype=np.uint8)}
PROPRIO = ((0.1, -0.2, 0.3, -2.0, 0.0, 2.1, 0.79), (0.04, -0.04))
FEEDBACK = bounded_feedback(2, [Issue("out_of_bounds", "actions[0][1] is outside [-1, 1]")] * 7)


def _delivery(
    sequence: int, *, proprio: bool, feedback: Feedback | None, max_calls: bool
) -> Delivery:
    joints, grip = PROPRIO if proprio else (None, None)
    return Delivery(
        sequence=sequence,
        request_id=secrets.token_hex(16),
        instruction="put both the alphabet soup and the tomato sauce in the basket",
        capture=Capture(images=dict(CAMERAS), joint_pos=joints, gripper_qpos=grip),
        action_spec=ActionSpec(
            layout=list(ACTION_LAYOUT), control_hz=20, replan_interval=5, max_chunk=8
        ),
        counters=PublicCounters(
            policy_calls=sequence - 1,
            max_policy_calls=10 if max_calls else None,
            executed_controls=5 * (sequence - 1),
            max_controls=50 if max_calls else None,
            rejected_responses=0 if feedback is None else 1,
        ),
        feedback=feedback,
    )


@pytest.mark.parametrize("proprio", [False, True])
@pytest.mark.parametrize("feedback", [None, FEEDBACK])
@pytest.mark.parametrize("max_calls", [False, True])
def test_the_document_is_the_models_and_meets_the_frozen_schema(
    proprio: bool, feedback: Feedback | None, max_calls: bool
) -> None:
    delivery = _delivery(3, proprio=proprio, feedback=feedback, max_calls=max_calls)
    document = observation_document(delivery, ENDPOINT)
    model = build_observation(delivery, ENDPOINT)
    assert document == to_document(model)
    body = document_bytes(document)
    assert body == document_bytes(to_document(model))
    assert schema_errors("mailroom.observation/v1", document) == []
    assert from_json(Observation, body) == model


def test_counters_built_without_validation_give_the_same_document() -> None:
    # The runner builds its counters with `model_construct` (its own counts, of the
    # right types by construction); the document must not tell the difference.
    delivery = _delivery(4, proprio=True, feedback=None, max_calls=True)
    fields = delivery.counters.model_dump()
    constructed = PublicCounters.model_construct(**fields)
    assert constructed == delivery.counters
    unvalidated = dataclasses.replace(delivery, counters=constructed)
    assert observation_document(unvalidated, ENDPOINT) == observation_document(delivery, ENDPOINT)
    assert observation_document(unvalidated, ENDPOINT) == to_document(
        build_observation(delivery, ENDPOINT)
    )
