"""An episode's actor and its provider gateway: the gate opened on the socket the actor
reaches, told which decision is pending as each observation goes out, ended when
`closed.json` is published, and its metered usage taken for the result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mailroom.mailbox.parser import ActionLimits
from mailroom.orchestrator.actors.launcher import ActorHandle, ActorLauncher, ProcessLauncher
from mailroom.orchestrator.actors.process import ActorProcess
from mailroom.orchestrator.gateway.server import EpisodeGate, worker_gateway
from mailroom.orchestrator.transport.base import (
    ActorCheck,
    Arrival,
    DecisionOutcome,
    Delivery,
    PolicyFailed,
    PollableTransport,
)


def open_gate(
    launcher: ActorLauncher | None, actor: ActorHandle, ledger: Path
) -> EpisodeGate | None:
    """The episode's gate when its actor reaches its provider through the gateway."""
    if not isinstance(launcher, ProcessLauncher) or launcher.provider is None:
        return None
    if not isinstance(actor, ActorProcess) or actor.network is None:
        return None
    if actor.gateway_token is None:
        return None
    return worker_gateway().open(
        actor.network.take_listener(),
        launcher.provider.declaration,
        token=actor.gateway_token,
        ledger_path=ledger,
        declared_model=launcher.provider.declared_model,
    )


def close_gate(gate: EpisodeGate) -> dict[str, Any]:
    """Stop serving the episode; its metered usage (`records.result.ProviderUsage`)."""
    return worker_gateway().close_episode(gate)


def budget_check(gate: EpisodeGate) -> ActorCheck:
    """A declared provider budget used up ends the episode, typed."""

    def check() -> PolicyFailed | None:
        if gate.exhausted is None:
            return None
        return PolicyFailed(
            "provider_budget_exhausted",
            f"the method's declared provider budget is spent ({gate.exhausted}); the gateway "
            "refuses its further requests",
        )

    return check


class GatedTransport:
    """A transport that tells the gate which decision's observation is pending, and
    ends it when the episode closes."""

    def __init__(self, inner: PollableTransport, gate: EpisodeGate) -> None:
        self.inner = inner
        self.gate = gate

    def deliver(self, delivery: Delivery) -> None:
        self.gate.pending_decision = delivery.sequence
        self.inner.deliver(delivery)

    def await_decision(
        self, delivery: Delivery, limits: ActionLimits, timeout_s: float
    ) -> DecisionOutcome:
        return self.inner.await_decision(delivery, limits, timeout_s)

    def poll_decision(
        self, delivery: Delivery, limits: ActionLimits, deadline: float | None = None
    ) -> DecisionOutcome | None:
        return self.inner.poll_decision(delivery, limits, deadline)

    def arrival(self) -> Arrival:
        return self.inner.arrival()

    def unseen_since(self) -> float | None:
        return self.inner.unseen_since()

    @property
    def recheck_interval(self) -> float:
        return self.inner.recheck_interval

    def close(self, last_sequence: int) -> None:
        self.gate.end()
        self.inner.close(last_sequence)
