"""An episode's actor and its provider gateway: the gate opened on the socket the actor
reaches, told which decision is pending as each observation goes out, ended when
`closed.json` is published, and its metered usage taken for the result.

Two endings are the gateway's to type: a declared provider budget spent truncates the
episode (`provider_budget`, the method's own limit), and an actor that went silent or
exited while its provider failed it (the last requests of the pending decision were
provider faults) ends as an infrastructure error, `provider_unavailable`, with the
evidence: never the method's failure.
"""

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
    InfrastructureFailed,
    PolicyFailed,
    PollableTransport,
    TimedOut,
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
            truncation="provider_budget",
        )

    return check


# Actor endings the provider's unavailability can explain: silence, or the agent's exit.
SILENT_ENDINGS = ("actor_exited",)


def unavailable(gate: EpisodeGate) -> str | None:
    """The evidence that the provider failed the actor during the pending decision: its
    last forwarded request of that decision ended in a provider fault. None otherwise."""
    pending = [
        r for r in gate.ledger.records if r.forwarded and r.decision == gate.pending_decision
    ]
    if not pending or pending[-1].outcome != "provider_fault":
        return None
    faults = [r for r in pending if r.outcome == "provider_fault"]
    kinds = ", ".join(sorted({f"{r.reason} ({r.status})" for r in faults}))
    return (
        f"the model provider was unavailable: {len(faults)} of the {len(pending)} model "
        f"requests of decision {gate.pending_decision} failed ({kinds}), the last of them "
        "too; the actor then gave no answer"
    )


class GatedTransport:
    """A transport that tells the gate which decision's observation is pending, ends it
    when the episode closes, and types an unanswered observation as the provider's
    unavailability when the gate's records say so (around the actor's guard, so it
    sees the guard's final verdict)."""

    def __init__(self, inner: PollableTransport, gate: EpisodeGate) -> None:
        self.inner = inner
        self.gate = gate

    def deliver(self, delivery: Delivery) -> None:
        self.gate.pending_decision = delivery.sequence
        self.inner.deliver(delivery)

    def _typed(self, outcome: DecisionOutcome) -> DecisionOutcome:
        silent = isinstance(outcome, TimedOut) or (
            isinstance(outcome, PolicyFailed) and outcome.code in SILENT_ENDINGS
        )
        evidence = unavailable(self.gate) if silent else None
        if evidence is None:
            return outcome
        return InfrastructureFailed("provider_unavailable", evidence)

    def await_decision(
        self, delivery: Delivery, limits: ActionLimits, timeout_s: float
    ) -> DecisionOutcome:
        return self._typed(self.inner.await_decision(delivery, limits, timeout_s))

    def poll_decision(
        self, delivery: Delivery, limits: ActionLimits, deadline: float | None = None
    ) -> DecisionOutcome | None:
        outcome = self.inner.poll_decision(delivery, limits, deadline)
        return None if outcome is None else self._typed(outcome)

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
