"""How an observation reaches a policy and a decision comes back.

Two transports share one contract: the file mailbox (the actor's whole world) and an
in-process `Policy.act` loop for scripted diagnostics and frozen programs. Both end in
the same frozen parser, so identical decisions give identical records.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from mailroom.mailbox.messages import Feedback, PublicCounters
from mailroom.mailbox.parser import Accepted, ActionLimits, Invalid, ProtocolError
from mailroom.orchestrator.sim.base import Capture
from mailroom.orchestrator.transport.published_action import PublishedActionSpec


@dataclass(frozen=True)
class Delivery:
    sequence: int
    request_id: str
    instruction: str
    capture: Capture
    action_spec: PublishedActionSpec
    counters: PublicCounters
    feedback: Feedback | None


@dataclass(frozen=True)
class TimedOut:
    waited_s: float
    kind: Literal["timeout"] = "timeout"


@dataclass(frozen=True)
class PolicyFailed:
    """The policy failed to answer: an in-process policy raised, or an actor process ended.

    The policy's own error, typed by `code` (`policy_exception`, `actor_exited`,
    `memory_limit`: the kernel ended the actor at its memory ceiling), or, with
    `truncation`, a budget the method declared for itself that it spent (the episode is
    truncated, not errored: `provider_budget`).
    """

    code: str
    message: str
    kind: Literal["policy_failed"] = "policy_failed"
    truncation: Literal["provider_budget"] | None = None


@dataclass(frozen=True)
class InfrastructureFailed:
    """No answer came because the evaluator's side failed the actor (its model provider
    was unavailable through the gateway): typed as infrastructure, never as the method's
    failure, with the evidence in `message`."""

    code: str
    message: str
    kind: Literal["infrastructure_failed"] = "infrastructure_failed"


DecisionOutcome = (
    Accepted | Invalid | ProtocolError | TimedOut | PolicyFailed | InfrastructureFailed
)


@dataclass(frozen=True)
class Arrival:
    """When the last decided response arrived and when serving it began (monotonic).

    Between the two it waited in the queue: a worker serving several live episodes
    was busy with another. For a transport with no queue they coincide.
    """

    arrived_at: float
    served_at: float

    @property
    def queue_delay_s(self) -> float:
        return max(0.0, self.served_at - self.arrived_at)

    @classmethod
    def now(cls) -> Arrival:
        t = time.monotonic()
        return cls(t, t)


class Transport(Protocol):
    def deliver(self, delivery: Delivery) -> None: ...

    def await_decision(
        self, delivery: Delivery, limits: ActionLimits, timeout_s: float
    ) -> DecisionOutcome: ...

    def arrival(self) -> Arrival:
        """The timing of the outcome the last wait returned."""
        ...

    def close(self, last_sequence: int) -> None: ...


@runtime_checkable
class PollableTransport(Transport, Protocol):
    """A transport that can also be asked without waiting (a worker's slots)."""

    def poll_decision(
        self, delivery: Delivery, limits: ActionLimits, deadline: float | None = None
    ) -> DecisionOutcome | None:
        """The outcome if one is there now; None: nothing yet, or nothing that arrived by
        `deadline` (monotonic: a response that came after it is late, whenever looked at)."""
        ...

    def unseen_since(self) -> float | None:
        """When something arrived that no poll has looked at yet (monotonic), or None."""
        ...

    @property
    def recheck_interval(self) -> float:
        """How often to poll when nothing says something arrived."""
        ...


# A check run while waiting for the actor: a typed failure ends the episode.
CHECK_SHARE = 20
ActorCheck = Callable[[], "PolicyFailed | None"]


class ActorGuard:
    """Waits on another transport in slices, checking on the actor between slices.

    A dead actor cannot answer: waiting out the whole deadline would only cost time.
    One more short wait after the actor is seen dead keeps a last response it wrote.
    Declared limits (such as the scratch quota) are checked before and during the wait.
    """

    def __init__(
        self,
        inner: PollableTransport,
        alive: Callable[[], bool],
        checks: Sequence[ActorCheck] = (),
        slice_s: float = 0.5,
    ) -> None:
        self.inner = inner
        self.alive = alive
        self.checks = tuple(checks)
        self.slice_s = slice_s
        # Polled: when the actor is next checked on, and when it was first seen dead.
        self._checked_at = 0.0
        self._dead_at: float | None = None

    def deliver(self, delivery: Delivery) -> None:
        self._checked_at, self._dead_at = 0.0, None
        self.inner.deliver(delivery)

    def arrival(self) -> Arrival:
        return self.inner.arrival()

    def unseen_since(self) -> float | None:
        return self.inner.unseen_since()

    @property
    def recheck_interval(self) -> float:
        return min(self.inner.recheck_interval, self.slice_s)

    def poll_decision(
        self, delivery: Delivery, limits: ActionLimits, deadline: float | None = None
    ) -> DecisionOutcome | None:
        """`await_decision` without waiting: the same checks, at most every `slice_s`,
        and the same last look (one slice) after the actor is seen dead."""
        now = time.monotonic()
        if now >= self._checked_at:
            failure = self._failed()
            spent = time.monotonic() - now
            # Served beside other episodes: checks that grow costly (an endpoint of many
            # files) take at most 1/CHECK_SHARE of the serving thread.
            self._checked_at = now + max(self.slice_s, CHECK_SHARE * spent)
            if failure is not None:
                return failure
            if self._dead_at is None and not self.alive():
                self._dead_at = now
        outcome = self.inner.poll_decision(delivery, limits, deadline)
        if outcome is not None:
            return outcome
        if self._dead_at is not None and now - self._dead_at >= self.slice_s:
            # A check may say why it ended (the kernel's OOM killer: `memory_limit`).
            return self._failed() or PolicyFailed(
                "actor_exited", "the actor process ended without answering"
            )
        return None

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
                return self._failed() or PolicyFailed(
                    "actor_exited", "the actor process ended without answering"
                )

    def close(self, last_sequence: int) -> None:
        self.inner.close(last_sequence)
