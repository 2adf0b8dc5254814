"""One episode's provider requests as the gateway saw them, and what they add up to.

Each request is one line of the attempt's `provider-requests.jsonl`, written as it ends:
route, status, outcome, the model asked for and the model the provider says answered,
the provider's own token counts, time to first byte and in all, bytes each way, and the
decision whose observation was pending. Never a body (prompts, images, reasoning text)
and never a header (a key, a token).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from mailroom.orchestrator.gateway.metering import Metered
from mailroom.orchestrator.gateway.prices import PriceTable
from mailroom.orchestrator.records.event_log import event_line
from mailroom.orchestrator.records.provider import ProviderBudgets, ProviderKind

# answered: the provider answered (any status but a fault's); provider_fault: 429, 5xx,
# no connection, TLS, a stream cut; refused: the gateway never forwarded it; agent_gone:
# the agent closed its connection before the answer was through.
Outcome = Literal["answered", "provider_fault", "refused", "agent_gone"]
REQUEST_EVENT = "provider_request"
UNKNOWN_MODEL = "unknown"
TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "server_tool_uses",
)


@dataclass(frozen=True)
class RequestRecord:
    decision: int
    method: str
    route: str
    outcome: Outcome
    reason: str | None  # why refused, or which provider fault
    status: int | None  # what the agent was answered (None: its connection was cut)
    requested_model: str | None = None
    answered_model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    server_tool_uses: int | None = None
    complete: bool = False  # the provider's final usage was seen
    # What this answer cost by the run's price table (its long-context tier, service tier
    # and hour-long cache writes are per request), or None with the reason.
    cost: float | None = None
    cost_note: str | None = None
    first_byte_ms: float | None = None
    total_ms: float = 0.0
    request_bytes: int = 0
    response_bytes: int = 0

    @classmethod
    def metered(
        cls, metered: Metered, *, prices: PriceTable, provider: ProviderKind, **fields: Any
    ) -> RequestRecord:
        """A forwarded request's record from what its answer said of itself. An answer
        that reported no usage at all (a fault, a model list) costs nothing to note."""
        reported = metered.input_tokens is not None or metered.output_tokens is not None
        priced = prices.cost(provider, metered.model, metered) if reported else None
        return cls(
            cost=None if priced is None else priced.usd,
            cost_note=None if priced is None else priced.reason,
            answered_model=metered.model,
            input_tokens=metered.input_tokens,
            output_tokens=metered.output_tokens,
            cache_read_tokens=metered.cache_read_tokens,
            cache_write_tokens=metered.cache_write_tokens,
            server_tool_uses=metered.server_tool_uses,
            complete=metered.complete,
            **fields,
        )

    @property
    def reported(self) -> bool:
        """Whether its answer reported usage or named a model (a generation's does)."""
        said = (self.answered_model, self.input_tokens, self.output_tokens)
        return any(value is not None for value in said)

    @property
    def forwarded(self) -> bool:
        return self.outcome != "refused"

    def document(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Totals:
    requests: int = 0
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOKEN_FIELDS, 0))
    cost: Decimal = Decimal(0)
    cost_notes: list[str] = field(default_factory=list)

    def add(self, record: RequestRecord) -> None:
        self.requests += 1
        for name in TOKEN_FIELDS:
            self.tokens[name] += getattr(record, name) or 0
        if record.cost is not None:
            self.cost += Decimal(str(record.cost))
        elif record.cost_note is not None and record.cost_note not in self.cost_notes:
            self.cost_notes.append(record.cost_note)

    @property
    def usd(self) -> float | None:
        """The summed cost, or None when any answer's cost could not be said."""
        return None if self.cost_notes else float(self.cost)

    @property
    def note(self) -> str | None:
        return "; ".join(self.cost_notes)[:500] if self.cost_notes else None


class EpisodeLedger:
    """The requests of one episode: appended to its file as each ends, totalled at the
    end. Written from the gateway's thread, read from the episode's."""

    def __init__(self, path: Path | None) -> None:
        self._lock = threading.Lock()
        self._records: list[RequestRecord] = []
        self._path = path
        self._fd: int | None = None
        if path is not None:
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def add(self, record: RequestRecord) -> None:
        line = event_line(REQUEST_EVENT, **record.document()).encode()
        with self._lock:
            self._records.append(record)
            if self._fd is not None:
                os.write(self._fd, line)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = None

    @property
    def records(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._records)

    def spent(self) -> dict[str, int]:
        """Forwarded requests and the tokens they cost so far (for the budgets)."""
        totals = _Totals()
        for record in self.records:
            if record.forwarded:
                totals.add(record)
        return {"requests": totals.requests, **totals.tokens}

    def spent_usd(self) -> float | None:
        """What the forwarded requests cost so far (None: some answer's cost is unknown)."""
        totals = _Totals()
        for record in self.records:
            if record.forwarded:
                totals.add(record)
        return totals.usd


def budget_passed(
    budgets: ProviderBudgets, spent: dict[str, int], cost_usd: float | None
) -> str | None:
    """Which declared budget the episode has used up, in words, or None."""
    if budgets.requests is not None and spent["requests"] >= budgets.requests:
        return f"{spent['requests']} requests of the declared {budgets.requests}"
    if budgets.input_tokens is not None and spent["input_tokens"] >= budgets.input_tokens:
        return f"{spent['input_tokens']} input tokens of the declared {budgets.input_tokens}"
    if budgets.output_tokens is not None and spent["output_tokens"] >= budgets.output_tokens:
        return f"{spent['output_tokens']} output tokens of the declared {budgets.output_tokens}"
    if budgets.cost_usd is not None and cost_usd is not None and cost_usd >= budgets.cost_usd:
        return f"USD {cost_usd:.4f} of the declared {budgets.cost_usd:g}"
    return None


def usage_document(
    records: Iterable[RequestRecord],
    *,
    provider: ProviderKind,
    declared_model: str | None,
) -> dict[str, Any]:
    """An episode's metered usage as its result records it (`records.result`'s
    `ProviderUsage`): totals per answering model and overall, cost summed from each
    answer's own (None with the reasons when any could not be priced), whether every
    answer named the declared model, and the requests and provider time of each decision."""
    records = list(records)
    forwarded = [r for r in records if r.forwarded]
    answered = [r for r in forwarded if r.outcome != "provider_fault"]
    # Answers that reported usage or named a model (a generation); the others are a
    # model list or a token count, which cost nothing and answer as no model.
    generations = [r for r in answered if r.reported]
    generated = {id(r) for r in generations}
    by_model: dict[str, _Totals] = defaultdict(_Totals)
    overall = _Totals()
    for record in generations:
        by_model[record.answered_model or UNKNOWN_MODEL].add(record)
        overall.add(record)
    models = [
        {
            "model": name,
            "requests": totals.requests,
            **totals.tokens,
            "cost": totals.usd,
            "cost_note": totals.note,
        }
        for name, totals in sorted(by_model.items())
    ]
    decisions: dict[int, dict[str, Any]] = {}
    for record in forwarded:
        row = decisions.setdefault(
            record.decision,
            {
                "decision": record.decision,
                "requests": 0,
                "provider_time_ms": 0.0,
                "input_tokens": 0,
                "output_tokens": 0,
            },
        )
        row["requests"] += 1
        row["provider_time_ms"] = round(row["provider_time_ms"] + record.total_ms, 3)
        if id(record) in generated:
            row["input_tokens"] += record.input_tokens or 0
            row["output_tokens"] += record.output_tokens or 0
    verified: bool | None = None
    if declared_model is not None and generations:
        verified = set(by_model) == {declared_model}
    return {
        "source": "gateway",
        "provider": provider,
        "provider_requests": len(forwarded),
        "refused_requests": len(records) - len(forwarded),
        "failed_requests": len(forwarded) - len(answered),
        "other_requests": len(answered) - len(generations),
        "unmetered_requests": sum(1 for r in generations if not r.complete),
        **overall.tokens,
        "cost": overall.usd,
        "cost_note": overall.note,
        "models": models,
        "declared_model": declared_model,
        "model_verified": verified,
        "provider_time_ms": round(sum(r.total_ms for r in forwarded), 3),
        "decisions": [decisions[d] for d in sorted(decisions)],
    }
