"""The file-mailbox transport: publish observations, watch, claim and parse responses."""

from __future__ import annotations

import time

from mailroom.mailbox.claim import claim_response
from mailroom.mailbox.endpoint import Endpoint
from mailroom.mailbox.messages import Closed, ImageRef, Observation, Proprio, to_document
from mailroom.mailbox.parser import (
    ActionLimits,
    Invalid,
    ProtocolError,
    parse_response,
)
from mailroom.mailbox.publish import canonical_json, publish_bytes
from mailroom.mailbox.watcher import InboxWatcher, WatchMode

from .evidence import EpisodeEvidence
from .hashing import sha256_bytes
from .libero_adapter import Capture
from .png import encode_png
from .transport import DecisionOutcome, Delivery, TimedOut


def observation_document(delivery: Delivery, endpoint: Endpoint) -> Observation:
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


class MailboxTransport:
    def __init__(
        self, endpoint: Endpoint, evidence: EpisodeEvidence, watch_mode: WatchMode = "inotify"
    ) -> None:
        self.endpoint = endpoint
        self.evidence = evidence
        self.watcher = InboxWatcher(endpoint.inbox, mode=watch_mode)
        self.watcher.start()
        self._encoded: tuple[Capture, dict[str, bytes]] | None = None
        self.published_at: dict[int, float] = {}

    def _png(self, capture: Capture) -> dict[str, bytes]:
        # A re-delivered capture (after a rejection) is the same object: encode it once.
        if self._encoded is None or self._encoded[0] is not capture:
            self._encoded = (capture, {c: encode_png(img) for c, img in capture.images.items()})
        return self._encoded[1]

    def deliver(self, delivery: Delivery) -> None:
        pngs = self._png(delivery.capture)
        image_hashes: dict[str, str] = {}
        for camera, data in pngs.items():
            path = self.endpoint.image_file(delivery.sequence, camera)
            publish_bytes(path, data)
            self.evidence.keep_observation_file(path.name, data)
            image_hashes[camera] = sha256_bytes(data)
        document = to_document(observation_document(delivery, self.endpoint))
        body = canonical_json(document)
        path = self.endpoint.observation_file(delivery.sequence)
        publish_bytes(path, body)
        self.published_at[delivery.sequence] = time.monotonic()
        self.evidence.keep_observation_file(path.name, body)
        self.evidence.event(
            "observation_published",
            sequence=delivery.sequence,
            request_id=delivery.request_id,
            image_sha256=image_hashes,
            feedback=document["feedback"],
        )

    def await_decision(
        self, delivery: Delivery, limits: ActionLimits, timeout_s: float
    ) -> DecisionOutcome:
        name = self.endpoint.response_name(delivery.sequence)
        started = time.monotonic()
        if not self.watcher.wait_for(name, timeout_s):
            return TimedOut(waited_s=time.monotonic() - started)
        claimed = claim_response(
            self.endpoint.inbox / name, self.evidence.response_path(delivery.sequence)
        )
        if isinstance(claimed, ProtocolError):
            self.evidence.event(
                "response_rejected",
                sequence=delivery.sequence,
                outcome="protocol_error",
                reason=claimed.reason.value,
                message=claimed.message,
            )
            return claimed
        outcome = parse_response(
            claimed.data, expected_request_id=delivery.request_id, limits=limits
        )
        detail: dict[str, object] = {"outcome": outcome.kind}
        if isinstance(outcome, Invalid):
            detail["reasons"] = [i.code for i in outcome.issues]
        elif isinstance(outcome, ProtocolError):
            detail["reason"] = outcome.reason.value
        else:
            detail["decision"] = outcome.decision
            detail["chunk_length"] = len(outcome.actions)
        self.evidence.event(
            "response_claimed",
            sequence=delivery.sequence,
            bytes=len(claimed.data),
            sha256=sha256_bytes(claimed.data),
            **detail,
        )
        return outcome

    def close(self, last_sequence: int) -> None:
        try:
            body = canonical_json(to_document(Closed(last_sequence=last_sequence)))
            publish_bytes(self.endpoint.closed_file, body)
            self.evidence.event("closed_published", last_sequence=last_sequence)
        finally:
            self.watcher.stop()
