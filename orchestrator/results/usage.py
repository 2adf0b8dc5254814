"""What the provider gateway metered over many results, and where nothing was metered.

A result's `usage` is what the gateway metered of its actor (`ProviderUsage`) or the null
`Usage`: nothing metered it (an external actor, an actor without the gateway, a result
from before v7, an episode that ended before its actor reached the gateway). A summary
keeps the two apart and never turns the second into zeros: its totals are null until a
result was metered, a mean says over how many metered episodes it was taken, and a cost
is null where an answer could not be priced, with the price table's own reasons.

The summary also counts what the gateway typed at an episode's end: a declared provider
budget spent (a `provider_budget` truncation: the method's own limit) and the provider
failing the actor (`infrastructure_error` `provider_unavailable`: the infrastructure's
failure, never the method's), and the results whose actor had the host's network (its
provider reached without the gateway: unmetered, and not confined on the network).

The words here (`usd_text`, the `*_text` sentences) are plain text shared by the report,
`compare` and the viewer; each caller escapes them where it shows them (a model name and
a cost note may carry what an actor made its provider say).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Annotated, Literal, get_args

from mailroom.orchestrator.records.result import (
    TOKEN_COUNTS,
    UNMETERED_BEFORE_GATEWAY,
    EpisodeResult,
    ProviderUsage,
)
from pydantic import BaseModel, ConfigDict, Field, model_validator

Count = Annotated[int, Field(ge=0)]
Usd = Annotated[float, Field(ge=0, allow_inf_nan=False)]
# Why a result's usage is null, in the order they are said.
UnmeteredReason = Literal["before_v7", "external_actor", "no_gateway", "no_gate"]
UNMETERED_WORDS: dict[UnmeteredReason, str] = {
    "before_v7": "result before v7",
    "external_actor": "external actor",
    "no_gateway": "no provider gateway",
    "no_gate": "actor never reached the gateway",
}
UNMETERED_DEFINITIONS: dict[UnmeteredReason, str] = {
    "before_v7": "a result written before mailroom.episode_result/v7 (before the gateway)",
    "external_actor": "an actor handed a launch message reaches its provider on its own",
    "no_gateway": (
        "a spawned actor without the provider gateway (no network, the host's network, or "
        "unconfined)"
    ),
    "no_gate": "a gateway run's episode that ended before its actor reached the gateway",
}
# The most distinct cost notes a summary keeps (each is already bounded by the result).
MAX_COST_NOTES = 5
ERROR_PROVIDER_UNAVAILABLE = "provider_unavailable"


def unmetered_reason(result: EpisodeResult) -> UnmeteredReason | None:
    """Why nothing metered this result's provider usage; None when the gateway did."""
    if isinstance(result.usage, ProviderUsage):
        return None
    if result.usage.source == UNMETERED_BEFORE_GATEWAY:
        return "before_v7"
    confinement = result.confinement
    if confinement is not None and confinement.mode == "external":
        return "external_actor"
    if confinement is not None and confinement.network == "gateway":
        return "no_gate"
    return "no_gateway"


def provider_unavailable(result: EpisodeResult) -> bool:
    """Whether the model provider failed the result's actor (the infrastructure's error)."""
    return any(
        e.kind == "infrastructure_error" and e.code == ERROR_PROVIDER_UNAVAILABLE
        for e in result.errors
    )


def _usd(value: float) -> float:
    """A sum of costs kept to a billionth of a dollar (float additions leave dust)."""
    return round(value, 9)


def _mean(total: float | None, n: int) -> float | None:
    return None if total is None or n == 0 else total / n


class ModelTotals(BaseModel):
    """One answering model over the metered episodes: in how many it answered, its
    requests and tokens, and their cost (null when an answer of it was not priced)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    episodes: Annotated[int, Field(ge=1)]
    requests: Count
    input_tokens: Count
    output_tokens: Count
    cache_read_tokens: Count
    cache_write_tokens: Count
    server_tool_uses: Count
    cost_usd: Usd | None
    unpriced_episodes: Count


class VerifiedTally(BaseModel):
    """The metered episodes by `model_verified`: every answer named the declared model,
    some answer did not, or nothing to verify (no declared model, or no answer)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    verified: Count = 0
    not_verified: Count = 0
    unknown: Count = 0


class UsageSummary(BaseModel):
    """Provider usage over a set of results (a suite's, a run's): metered and not, the
    totals, the means per metered episode, the cost per success, per answering model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    results: Count = 0
    metered: Count = 0
    # The results nothing metered, by why (`UNMETERED_WORDS`; none at 0).
    unmetered: dict[UnmeteredReason, Annotated[int, Field(ge=1)]] = Field(default_factory=dict)
    # Totals over the metered results: null when none was metered, never 0.
    provider_requests: Count | None = None
    refused_requests: Count | None = None
    failed_requests: Count | None = None
    other_requests: Count | None = None
    unmetered_requests: Count | None = None
    input_tokens: Count | None = None
    output_tokens: Count | None = None
    cache_read_tokens: Count | None = None
    cache_write_tokens: Count | None = None
    server_tool_uses: Count | None = None
    provider_time_ms: Annotated[float, Field(ge=0)] | None = None
    # Means per metered episode (over `metered`).
    requests_per_episode: Annotated[float, Field(ge=0)] | None = None
    input_tokens_per_episode: Annotated[float, Field(ge=0)] | None = None
    output_tokens_per_episode: Annotated[float, Field(ge=0)] | None = None
    provider_time_ms_per_episode: Annotated[float, Field(ge=0)] | None = None
    # Cost: `priced` metered episodes have one, `unpriced` not (the table's reasons in
    # `cost_notes`). The total is null unless every metered episode was priced; the mean
    # per episode is over the priced ones; the cost per success is the total over the
    # successes among the metered episodes (null without a total or a success).
    priced: Count = 0
    unpriced: Count = 0
    cost_notes: list[str] = Field(default_factory=list)
    cost_usd: Usd | None = None
    priced_cost_usd: Usd | None = None
    cost_per_episode_usd: Usd | None = None
    successes_metered: Count = 0
    cost_per_success_usd: Usd | None = None
    models: list[ModelTotals] = Field(default_factory=list)
    declared_models: list[str] = Field(default_factory=list)
    model_verified: VerifiedTally = Field(default_factory=VerifiedTally)
    # Answering models other than their episode's declared one.
    other_models: list[str] = Field(default_factory=list)
    # Over every result, metered or not.
    provider_budget_truncations: Count = 0
    provider_unavailable_errors: Count = 0
    host_network: Count = 0

    @model_validator(mode="after")
    def _parts_add_up(self) -> UsageSummary:
        if self.metered + sum(self.unmetered.values()) != self.results:
            raise ValueError("metered and unmetered results add up to results")
        if self.priced + self.unpriced != self.metered:
            raise ValueError("priced and unpriced episodes add up to the metered ones")
        if (self.provider_requests is None) != (self.metered == 0):
            raise ValueError("the totals are null exactly when nothing was metered")
        if (self.cost_usd is None) != (self.metered == 0 or self.unpriced > 0):
            raise ValueError("the total cost is null exactly when a metered episode is unpriced")
        if (self.cost_per_episode_usd is None) != (self.priced == 0):
            raise ValueError("the cost per episode is a mean over the priced episodes")
        verified = self.model_verified
        if verified.verified + verified.not_verified + verified.unknown != self.metered:
            raise ValueError("model_verified tallies the metered episodes")
        if self.successes_metered > self.metered:
            raise ValueError("the successes counted are among the metered episodes")
        return self


def summarize_usage(results: Iterable[EpisodeResult]) -> UsageSummary:
    """The usage of `results` (each counted once, as given)."""
    results = list(results)
    metered = [(r, r.usage) for r in results if isinstance(r.usage, ProviderUsage)]
    unmetered: dict[UnmeteredReason, int] = defaultdict(int)
    for result in results:
        reason = unmetered_reason(result)
        if reason is not None:
            unmetered[reason] += 1
    common = {
        "results": len(results),
        "metered": len(metered),
        "unmetered": {r: unmetered[r] for r in get_args(UnmeteredReason) if unmetered[r]},
        "provider_budget_truncations": sum(r.truncation == "provider_budget" for r in results),
        "provider_unavailable_errors": sum(provider_unavailable(r) for r in results),
        "host_network": sum(
            r.confinement is not None and r.confinement.network == "host" for r in results
        ),
    }
    if not metered:
        return UsageSummary.model_validate(common)
    usages = [u for _, u in metered]
    n = len(usages)
    totals: dict[str, int] = {
        name: sum(int(getattr(u, name)) for u in usages)
        for name in (
            "provider_requests",
            "refused_requests",
            "failed_requests",
            "other_requests",
            "unmetered_requests",
            *TOKEN_COUNTS,
        )
    }
    time_ms = round(math.fsum(u.provider_time_ms for u in usages), 3)
    costs = [u.cost for u in usages if u.cost is not None]
    notes: list[str] = []
    for usage in usages:
        if usage.cost_note is not None and usage.cost_note not in notes:
            notes.append(usage.cost_note)
    priced_cost = _usd(math.fsum(costs)) if costs else None
    total_cost = priced_cost if len(costs) == n else None
    successes = sum(r.outcome == "success" for r, _ in metered)
    verified = VerifiedTally(
        verified=sum(u.model_verified is True for u in usages),
        not_verified=sum(u.model_verified is False for u in usages),
        unknown=sum(u.model_verified is None for u in usages),
    )
    return UsageSummary.model_validate(
        {
            **common,
            **totals,
            "provider_time_ms": time_ms,
            "requests_per_episode": totals["provider_requests"] / n,
            "input_tokens_per_episode": totals["input_tokens"] / n,
            "output_tokens_per_episode": totals["output_tokens"] / n,
            "provider_time_ms_per_episode": time_ms / n,
            "priced": len(costs),
            "unpriced": n - len(costs),
            "cost_notes": notes[:MAX_COST_NOTES],
            "cost_usd": total_cost,
            "priced_cost_usd": priced_cost,
            "cost_per_episode_usd": _mean(priced_cost, len(costs)),
            "successes_metered": successes,
            "cost_per_success_usd": _mean(total_cost, successes),
            "models": _models(usages),
            "declared_models": sorted({u.declared_model for u in usages if u.declared_model}),
            "model_verified": verified,
            "other_models": sorted(
                {
                    m.model
                    for u in usages
                    if u.declared_model is not None
                    for m in u.models
                    if m.model != u.declared_model
                }
            ),
        }
    )


def _models(usages: Sequence[ProviderUsage]) -> list[ModelTotals]:
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    costs: dict[str, list[float]] = defaultdict(list)
    for usage in usages:
        for model in usage.models:
            row = counts[model.model]
            row["episodes"] += 1
            row["requests"] += model.requests
            for name in TOKEN_COUNTS:
                row[name] += int(getattr(model, name))
            if model.cost is None:
                row["unpriced_episodes"] += 1
            else:
                costs[model.model].append(model.cost)
    return [
        ModelTotals(
            model=name,
            episodes=row["episodes"],
            requests=row["requests"],
            input_tokens=row["input_tokens"],
            output_tokens=row["output_tokens"],
            cache_read_tokens=row["cache_read_tokens"],
            cache_write_tokens=row["cache_write_tokens"],
            server_tool_uses=row["server_tool_uses"],
            cost_usd=None if row["unpriced_episodes"] else _usd(math.fsum(costs[name])),
            unpriced_episodes=row["unpriced_episodes"],
        )
        for name, row in sorted(counts.items())
    ]


# Words, shared by the report, compare and the viewer (plain text: escape where shown).


def usd_text(value: float | None, *, signed: bool = False) -> str:
    """A cost in US dollars as a person writes it: "$12.35", "$0.0123", "$0.000041"
    (two significant digits at least, never a rounded-away cost), "n/a" for null; with
    `signed`, a difference: "+$0.19", "-$0.19"."""
    if value is None:
        return "n/a"
    sign = ("+" if value > 0 else "-" if value < 0 else "") if signed else ""
    if value < 0 and not signed:
        sign = "-"
    size = abs(value)
    if size == 0:
        shown = "0"
    elif size >= 1:
        shown = f"{size:,.2f}"
    else:
        digits = max(2, 1 - math.floor(math.log10(size)) + 1)
        whole, _, decimals = f"{size:.{digits}f}".partition(".")
        shown = f"{whole}.{decimals[:2]}{decimals[2:].rstrip('0')}"
    return f"{sign}${shown}"


def count_text(value: float | None) -> str:
    """A count or a mean of counts: "1,234,567", "123.4"; "n/a" for null."""
    if value is None:
        return "n/a"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.1f}"


def unmetered_text(unmetered: dict[UnmeteredReason, int]) -> str:
    """ "1 external actor, 2 result before v7"."""
    return ", ".join(f"{n} {UNMETERED_WORDS[reason]}" for reason, n in unmetered.items())


def _results(n: int) -> str:
    return f"{n} result" if n == 1 else f"{n} results"


def metered_text(u: UsageSummary) -> str:
    """How many results were metered, and why the others were not."""
    if u.results == 0:
        return "provider usage: no result yet"
    if u.metered == 0:
        return (
            f"provider usage: not metered in any of the {_results(u.results)} (null, not "
            f"zero): {unmetered_text(u.unmetered)}"
        )
    said = (
        f"provider usage: metered by the provider gateway in {u.metered} of {_results(u.results)}"
    )
    if u.unmetered:
        said += (
            f"; {u.results - u.metered} not metered (null, not zero): {unmetered_text(u.unmetered)}"
        )
    return said


def cost_text(u: UsageSummary) -> str | None:
    """The cost per episode and per success, each with its n; None without metering."""
    if u.metered == 0:
        return None
    per_episode = (
        f"{usd_text(u.cost_per_episode_usd)} per episode (mean of {u.priced} priced)"
        if u.priced
        else "no episode priced"
    )
    if u.cost_per_success_usd is not None:
        per_success = (
            f"{usd_text(u.cost_per_success_usd)} per success (total / {u.successes_metered} "
            "successes among the metered episodes)"
        )
    elif u.cost_usd is None:
        per_success = "per success n/a (the total is unknown)"
    else:
        per_success = "per success n/a (no success among the metered episodes)"
    said = f"cost: {usd_text(u.cost_usd)} in all; {per_episode}; {per_success}"
    if u.unpriced:
        said += (
            f"; unpriced in {u.unpriced} of {u.metered} metered episodes "
            f"({usd_text(u.priced_cost_usd)} over the priced): {'; '.join(u.cost_notes)}"
        )
    return said


def verified_text(u: UsageSummary) -> str | None:
    """Whether the answers named the declared model, and the other models that answered."""
    if u.metered == 0:
        return None
    declared = ", ".join(u.declared_models) or "none declared"
    said = (
        f"answering model: every answer named the declared model ({declared}) in "
        f"{u.model_verified.verified} of {u.metered} metered episodes"
    )
    if u.model_verified.unknown:
        said += f" ({u.model_verified.unknown} with nothing to verify)"
    if u.other_models:
        said += f"; other answering models: {', '.join(u.other_models)}"
    return said


def endings_text(u: UsageSummary) -> list[str]:
    """The gateway's typed endings, each apart: the method's budget, the provider's fault."""
    said = []
    if u.provider_budget_truncations:
        said.append(
            f"provider budget spent: {u.provider_budget_truncations} episode(s) truncated "
            "(provider_budget: the method's own declared limit)"
        )
    if u.provider_unavailable_errors:
        said.append(
            f"provider unavailable: {u.provider_unavailable_errors} episode(s) ended "
            "infrastructure_error provider_unavailable: the model provider failed the actor "
            "(the infrastructure's failure, not the method's)"
        )
    return said


def host_network_text(u: UsageSummary, run_network: str | None) -> str | None:
    """A run (or results) whose actors had the host's network: unmetered, not confined."""
    if run_network == "host":
        return (
            "network: the run's actors had the host's network: their provider usage is not "
            "metered and they were not confined on the network"
        )
    if u.host_network:
        return (
            f"network: {u.host_network} result(s) had the host's network: not metered and "
            "not confined on the network"
        )
    return None
