"""The public observation document for one delivery (protocol names from the endpoint)."""

from __future__ import annotations

from mailroom.mailbox.endpoint import Endpoint
from mailroom.mailbox.messages import ImageRef, Observation, Proprio

from .transport import Delivery


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
