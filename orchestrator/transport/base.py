"""How an observation reaches a policy and a decision comes back.

Two transports share one contract: the file mailbox (the actor's whole world) and an
in-process `Policy.act` loop for scripted diagnostics and frozen programs. Both end in
the same frozen parser, so identical decisions give identical records.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from mailroom.mailbox.messages import ActionSpec, Feedback, PublicCounters
from mailroom.mailbox.parser import Accepted, ActionLimits, Invalid, ProtocolError
from mailroom.orchestrator.sim.base import Capture


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
    """The policy failed to answer: an in-process policy raised, or an actor process ended.

    The policy's own error, typed by `code` (`policy_exception`, `actor_exited`).
    """

    code: str
    message: str
    kind: Literal["policy_failed"] = "policy_failed"


DecisionOutcome = Accepted | Invalid | ProtocolError | TimedOut | PolicyFailed


class Transport(Protocol):
    def deliver(self, delivery: Delivery) -> None: ...

    def await_decision(
        self, delivery: Delivery, limits: ActionLimits, timeout_s: float
    ) -> DecisionOutcome: ...

    def close(self, last_sequence: int) -> None: ...


# A check run while waiting for the actor: a typed failure ends the episode.
ActorCheck = Callable[[], "PolicyFailed | None"]


class ActorGuard:
    """Waits on another transport in slices, checking on the actor between slices.

    A dead actor cannot answer: waiting out the whole deadline would only cost time.
    One more short wait after the actor is seen dead keeps a last response it wrote.
    Declared limits (such as the scratch quota) are checked before and during the wait.
    """

    def __init__(
        self,
        inner: Transport,
        alive: Callable[[], bool],
        checks: Sequence[ActorCheck] = (),
        slice_s: float = 0.5,
    ) -> None:
        self.inner = inner
        self.alive = alive
        self.checks = tuple(checks)
        self.slice_s = slice_s

    def deliver(self, delivery: Delivery) -> None:
        self.inner.deliver(delivery)

    def _failed(self) -> PolicyFailed | None:
        for check in self.checks:
            failure = check()
            if failure is not None:
                return failure
        return None

    def await_decision(
        self, delivery: Delivery, limits: ActionLimits, timeout_s: float
    ) -> DecisionOutcome:
        deadline = time.monotonic() + timeout_s
        while True:
            failure = self._failed()
            if failure is not None:
                return failure
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return TimedOut(waited_s=timeout_s)
            outcome = self.inner.await_decision(delivery, limits, min(self.slice_s, remaining))
            if not isinstance(outcome, TimedOut):
                return outcome
            if not self.alive():
                last = self.inner.await_decision(delivery, limits, self.slice_s)
                if not isinstance(last, TimedOut):
                    return last
                return PolicyFailed("actor_exited", "the actor process ended without answering")

    def close(self, last_sequence: int) -> None:
        self.inner.close(last_sequence)
