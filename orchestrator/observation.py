"""The public observation document for one delivery (protocol names from the endpoint).

`build_observation` gives the pydantic model (what an in-process policy receives);
`observation_document` gives the same wire document as a plain dict, without the
model's round trip, for the mailbox's per-decision path. Both are built from the same
fields: tests/test_observation_document.py proves they agree and that the document
meets the frozen schema.
"""

from __future__ import annotations

from mailroom.mailbox.endpoint import Endpoint
from mailroom.mailbox.messages import (
    OBSERVATION_SCHEMA,
    ImageRef,
    Observation,
    Proprio,
    to_document,
)

from .transport import Delivery

_IMAGE_ENCODING = "png/rgb8"
_HISTORY = "current_observation_only"


def build_observation(delivery: Delivery, endpoint: Endpoint) -> Observation:
    capture = delivery.capture
    images = {
        camera: ImageRef(
            file=endpoint.relative(endpoint.image_file(delivery.sequence, camera)),
            width=int(image.shape[1]),
            height=int(image.shape[0]),
        )
        for camera, image in capture.images.items()
    }
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
        action_spec=delivery.action_spec,
        counters=delivery.counters,
        feedback=delivery.feedback,
    )


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
    proprio = None
    if capture.joint_pos is not None and capture.gripper_qpos is not None:
        proprio = {
            "joint_pos": list(capture.joint_pos),
            "gripper_qpos": list(capture.gripper_qpos),
        }
    return {
        "schema": OBSERVATION_SCHEMA,
        "request_id": delivery.request_id,
        "sequence": sequence,
        "response_file": f"inbox/{endpoint.response_name(sequence)}",
        "instruction": delivery.instruction,
        "images": images,
        "proprio": proprio,
        "action_spec": to_document(delivery.action_spec),
        "counters": to_document(delivery.counters),
        "feedback": None if delivery.feedback is None else to_document(delivery.feedback),
        "history": _HISTORY,
    }
