"""A hand-made orchestrator for one endpoint: publishes observations, takes responses.

It plays the protocol the actor instructions describe, with the project's own endpoint,
publication and parser code, but no simulator: each observation shows the same two
plain images, each published `delay_s` after the previous response was taken (a slow
simulator). Every response is judged by the real parser; an invalid one, or one whose
sequence is in `reject`, is answered by the next observation's `feedback`. The episode
closes after a stop, after `max_observations`, or when a response does not come in time.
"""

from __future__ import annotations

import os
import secrets
import time
import zlib
from dataclasses import dataclass, field

from mailroom.mailbox.endpoint import Endpoint
from mailroom.mailbox.messages import (
    ActionSpec,
    Closed,
    Feedback,
    FeedbackIssue,
    ImageRef,
    Observation,
    PublicCounters,
    to_document,
)
from mailroom.mailbox.parser import Accepted, ActionLimits, Invalid, Issue, parse_response
from mailroom.mailbox.publish import document_bytes, publish_all_to_outbox

CAMERAS = ("agentview", "robot0_eye_in_hand")
LAYOUT = ["dx", "dy", "dz", "droll_axis_angle", "dpitch_axis_angle", "dyaw_axis_angle", "gripper"]
IMAGE_SIDE = 256


def plain_png(side: int = IMAGE_SIDE, rgb: tuple[int, int, int] = (96, 128, 160)) -> bytes:
    """A valid 8-bit RGB PNG of one colour."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = side.to_bytes(4, "big") * 2 + bytes([8, 2, 0, 0, 0])
    row = b"\x00" + bytes(rgb) * side
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(row * side))
        + chunk(b"IEND", b"")
    )


@dataclass
class Exchange:
    """One observation and what came of it."""

    sequence: int
    request_id: str
    published_at: float
    answered_at: float | None = None
    outcome: str = "pending"  # "act", "stop", "invalid:<code>", "timeout", "error:<reason>"


@dataclass
class HandMailbox:
    endpoint: Endpoint
    instruction: str = "put the bowl on the plate"
    max_observations: int = 10
    response_timeout_s: float = 120.0
    replan_interval: int = 5
    max_chunk: int = 5
    delay_s: float = 0.0
    reject: frozenset[int] = frozenset()
    exchanges: list[Exchange] = field(default_factory=list)
    closed_at: float | None = None

    def _observation(self, sequence: int, feedback: Feedback | None) -> Observation:
        images = {
            camera: ImageRef(
                file=f"outbox/{self.endpoint.image_name(sequence, camera)}",
                width=IMAGE_SIDE,
                height=IMAGE_SIDE,
            )
            for camera in CAMERAS
        }
        rejected = sum(1 for e in self.exchanges if e.outcome.startswith("invalid"))
        executed = sum(self.replan_interval for e in self.exchanges if e.outcome == "act")
        return Observation(
            request_id=secrets.token_hex(16),
            sequence=sequence,
            response_file=f"inbox/{self.endpoint.response_name(sequence)}",
            instruction=self.instruction,
            images=images,
            proprio=None,
            action_spec=ActionSpec(
                layout=LAYOUT,
                control_hz=20,
                replan_interval=self.replan_interval,
                max_chunk=self.max_chunk,
            ),
            counters=PublicCounters(
                policy_calls=sequence - 1,
                max_policy_calls=self.max_observations,
                executed_controls=executed,
                max_controls=None,
                rejected_responses=rejected,
            ),
            feedback=feedback,
        )

    def _publish(self, sequence: int, feedback: Feedback | None) -> Exchange:
        observation = self._observation(sequence, feedback)
        image = plain_png()
        items = [(self.endpoint.image_name(sequence, c), image) for c in CAMERAS]
        items.append((f"obs-{sequence}.json", document_bytes(to_document(observation))))
        publish_all_to_outbox(self.endpoint.held, items, durable=False)
        exchange = Exchange(sequence, observation.request_id, time.monotonic())
        self.exchanges.append(exchange)
        return exchange

    def _take(self, sequence: int, deadline: float) -> bytes | None:
        """The response file's bytes once its final name appears (then removed)."""
        name = self.endpoint.response_name(sequence)
        inbox_fd = self.endpoint.held.inbox_fd
        while time.monotonic() < deadline:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=inbox_fd)
            except FileNotFoundError:
                time.sleep(0.02)
                continue
            try:
                data = b""
                while chunk := os.read(fd, 1 << 16):
                    data += chunk
            finally:
                os.close(fd)
            os.unlink(name, dir_fd=inbox_fd)
            return data
        return None

    def run(self) -> list[Exchange]:
        """Play the episode to its end; closed.json is published last."""
        feedback: Feedback | None = None
        for sequence in range(1, self.max_observations + 1):
            time.sleep(self.delay_s)
            exchange = self._publish(sequence, feedback)
            feedback = None
            data = self._take(sequence, exchange.published_at + self.response_timeout_s)
            exchange.answered_at = time.monotonic()
            if data is None:
                exchange.outcome = "timeout"
                break
            outcome = parse_response(
                data,
                expected_request_id=exchange.request_id,
                limits=ActionLimits(max_chunk=self.max_chunk),
            )
            if isinstance(outcome, Accepted) and sequence in self.reject:
                outcome = Invalid((Issue("chunk_too_long", "rejected on purpose"),))
            if isinstance(outcome, Accepted):
                exchange.outcome = outcome.decision
                if outcome.decision == "stop":
                    break
            elif isinstance(outcome, Invalid):
                exchange.outcome = f"invalid:{outcome.reason}"
                issues = [FeedbackIssue(code=i.code, message=i.message) for i in outcome.issues]
                feedback = Feedback(
                    rejected_sequence=sequence, issues=issues[:5], more_issues=len(issues[5:])
                )
            else:
                exchange.outcome = f"error:{outcome.reason}"
                break
        last = self.exchanges[-1].sequence if self.exchanges else 0
        closed = to_document(Closed(last_sequence=last))
        publish_all_to_outbox(self.endpoint.held, [("closed.json", document_bytes(closed))])
        self.closed_at = time.monotonic()
        return self.exchanges
