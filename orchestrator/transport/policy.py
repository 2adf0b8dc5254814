"""The in-process transport: a `Policy.act(observation) -> response document` loop.

For scripted diagnostics and frozen programs. The response document goes through the
same JSON bytes and the same frozen parser as a mailbox response, so identical
decisions give identical records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt
from mailroom.hashing import sha256_bytes
from mailroom.mailbox.endpoint import Endpoint
from mailroom.mailbox.messages import Observation
from mailroom.mailbox.messages_v2 import ObservationV2
from mailroom.mailbox.parser import ActionLimits, parse_response
from mailroom.orchestrator.transport.base import Arrival, DecisionOutcome, Delivery, PolicyFailed
from mailroom.orchestrator.transport.evidence_sink import EvidenceSink
from mailroom.orchestrator.transport.observation import build_observation

# File names an in-process policy would have seen in a mailbox; no file is written.
_VIRTUAL_ENDPOINT = Endpoint(Path("/endpoint"))


@dataclass(frozen=True)
class PolicyObservation:
    """What an in-process policy sees: the public document and the decoded images."""

    document: Observation | ObservationV2
    images: dict[str, npt.NDArray[np.uint8]]


class Policy(Protocol):
    def act(self, observation: PolicyObservation) -> object:
        """Return a response document in the observation's protocol (or anything: it is
        judged as sent)."""
        ...


class PolicyTransport:
    def __init__(self, policy: Policy, evidence: EvidenceSink) -> None:
        self.policy = policy
        self.evidence = evidence
        self._pending: PolicyObservation | None = None
        self._arrival = Arrival.now()

    def deliver(self, delivery: Delivery) -> None:
        document = build_observation(delivery, _VIRTUAL_ENDPOINT)
        self._pending = PolicyObservation(document=document, images=delivery.capture.images)
        self.evidence.event(
            "observation_published",
            sequence=delivery.sequence,
            request_id=delivery.request_id,
            image_sha256={
                c: sha256_bytes(img.tobytes()) for c, img in delivery.capture.images.items()
            },
            feedback=None if delivery.feedback is None else delivery.feedback.model_dump(),
        )

    def await_decision(
        self, delivery: Delivery, limits: ActionLimits, timeout_s: float
    ) -> DecisionOutcome:
        assert self._pending is not None and self._pending.document.sequence == delivery.sequence
        try:
            answer = self.policy.act(self._pending)
            data = json.dumps(answer, allow_nan=True).encode("utf-8")
        except Exception as exc:  # a policy bug is the policy's error, typed and kept
            return PolicyFailed("policy_exception", f"{type(exc).__name__}: {exc}"[:2000])
        self._arrival = Arrival.now()
        self.evidence.response_path(delivery.sequence).write_bytes(data)
        outcome = parse_response(data, expected_request_id=delivery.request_id, limits=limits)
        self.evidence.event(
            "response_claimed",
            sequence=delivery.sequence,
            bytes=len(data),
            sha256=sha256_bytes(data),
            outcome=outcome.kind,
        )
        return outcome

    def arrival(self) -> Arrival:
        return self._arrival

    def close(self, last_sequence: int) -> None:
        self.evidence.event("closed_published", last_sequence=last_sequence)
