"""The public observation document for one delivery (protocol names from the endpoint).

`build_observation` gives the pydantic model (what an in-process policy receives);
`observation_document` gives the same wire document as a plain dict, without the
model's round trip, for the mailbox's per-decision path. Both are built from the same
fields: tests/unit/test_observation_document.py proves they agree and that the document
meets the frozen schema.
"""

from __future__ import annotations

from mailroom.mailbox.endpoint import Endpoint
from mailroom.mailbox.messages import (
    OBSERVATION_SCHEMA,
    ImageRef,
    Observation,
    Proprio,
    PublicCounters,
    to_document,
)
from mailroom.mailbox.messages_v2 import OBSERVATION_V2_SCHEMA, ActionSpecV2, ObservationV2
from mailroom.orchestrator.sim.base import Capture
from mailroom.orchestrator.transport.base import Delivery
from mailroom.orchestrator.transport.published_action import PublishedActionSpec

_IMAGE_ENCODING = "png/rgb8"
_HISTORY = "current_observation_only"


def _proprio_fields(capture: Capture) -> dict[str, list[float]] | None:
    """A capture's proprioception by field name (what protocol v2 publishes)."""
    if capture.joint_pos is None or capture.gripper_qpos is None:
        return None
    return {"joint_pos": list(capture.joint_pos), "gripper_qpos": list(capture.gripper_qpos)}


def build_observation(delivery: Delivery, endpoint: Endpoint) -> Observation | ObservationV2:
    capture = delivery.capture
    images = {
        camera: ImageRef(
            file=endpoint.relative(endpoint.image_file(delivery.sequence, camera)),
            width=int(image.shape[1]),
            height=int(image.shape[0]),
        )
        for camera, image in capture.images.items()
    }
    spec = delivery.action_spec
    if isinstance(spec, ActionSpecV2):
        return ObservationV2(
            request_id=delivery.request_id,
            sequence=delivery.sequence,
            response_file=endpoint.relative(endpoint.response_file(delivery.sequence)),
            instruction=delivery.instruction,
            images=images,
            proprio=_proprio_fields(capture),
            action_spec=spec,
            counters=delivery.counters,
            feedback=delivery.feedback,
        )
    proprio = None
    if capture.joint_pos is not None and capture.gripper_qpos is not None:
        proprio = Proprio(
            joint_pos=list(capture.joint_pos), gripper_qpos=list(capture.gripper_qpos)
        )
    return Observation(
        request_id=delivery.request_id,
        sequence=delivery.sequence,
        response_file=endpoint.relative(endpoint.response_file(delivery.sequence)),
        instruction=delivery.instruction,
        images=images,
        proprio=proprio,
        action_spec=spec,
        counters=delivery.counters,
        feedback=delivery.feedback,
    )


# An episode publishes the same action spec with every observation: dumped once.
_last_spec: tuple[PublishedActionSpec, dict[str, object]] | None = None


def _action_spec_document(spec: PublishedActionSpec) -> dict[str, object]:
    global _last_spec
    if _last_spec is None or _last_spec[0] is not spec:
        _last_spec = (spec, to_document(spec))
    return dict(_last_spec[1])


def _counters_document(counters: PublicCounters) -> dict[str, object]:
    return {
        "policy_calls": counters.policy_calls,
        "max_policy_calls": counters.max_policy_calls,
        "executed_controls": counters.executed_controls,
        "max_controls": counters.max_controls,
        "rejected_responses": counters.rejected_responses,
    }


def observation_document(delivery: Delivery, endpoint: Endpoint) -> dict[str, object]:
    """`to_document(build_observation(delivery, endpoint))`, built directly."""
    capture = delivery.capture
    sequence = delivery.sequence
    images = {
        camera: {
            "file": f"outbox/{endpoint.image_name(sequence, camera)}",
            "width": int(image.shape[1]),
            "height": int(image.shape[0]),
            "encoding": _IMAGE_ENCODING,
        }
        for camera, image in capture.images.items()
    }
    v2 = isinstance(delivery.action_spec, ActionSpecV2)
    return {
        "schema": OBSERVATION_V2_SCHEMA if v2 else OBSERVATION_SCHEMA,
        "request_id": delivery.request_id,
        "sequence": sequence,
        "response_file": f"inbox/{endpoint.response_name(sequence)}",
        "instruction": delivery.instruction,
        "images": images,
        "proprio": _proprio_fields(capture),
        "action_spec": _action_spec_document(delivery.action_spec),
        "counters": _counters_document(delivery.counters),
        "feedback": None if delivery.feedback is None else to_document(delivery.feedback),
        "history": _HISTORY,
    }
