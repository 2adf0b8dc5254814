"""How an observation reaches a policy and a decision comes back.

Two transports share one contract: the file mailbox (the actor's whole world) and an
in-process `Policy.act` loop for scripted diagnostics and frozen programs. Both end in
the same frozen parser, so identical decisions give identical records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from mailroom.mailbox.messages import ActionSpec, Feedback, PublicCounters
from mailroom.mailbox.parser import Accepted, ActionLimits, Invalid, ProtocolError

from .libero_adapter import Capture


@dataclass(frozen=True)
class Delivery:
    sequence: int
    request_id: str
    instruction: str
    capture: Capture
    action_spec: ActionSpec
    counters: PublicCounters
    feedback: Feedback | None


@dataclass(frozen=True)
class TimedOut:
    waited_s: float
    kind: Literal["timeout"] = "timeout"


@dataclass(frozen=True)
class PolicyFailed:
    """An in-process policy raised instead of answering: the policy's own error."""

    message: str
    kind: Literal["policy_failed"] = "policy_failed"


DecisionOutcome = Accepted | Invalid | ProtocolError | TimedOut | PolicyFailed


class Transport(Protocol):
    def deliver(self, delivery: Delivery) -> None: ...

    def await_decision(
        self, delivery: Delivery, limits: ActionLimits, timeout_s: float
    ) -> DecisionOutcome: ...

    def close(self, last_sequence: int) -> None: ...
