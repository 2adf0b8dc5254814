"""What the provider gateway metered of one attempt's actor, for its page: per answering
model and per decision (the provider time beside the decision's latency), or why
nothing was metered (null, never zero)."""

from __future__ import annotations

from collections.abc import Sequence

from mailroom.orchestrator.records.result import DecisionUsage, EpisodeResult, ProviderUsage
from mailroom.orchestrator.results.usage import (
    UNMETERED_WORDS,
    count_text,
    unmetered_reason,
    usd_text,
)
from mailroom.orchestrator.viewer.markup import esc, fact_rows, table
from mailroom.orchestrator.viewer.readable import ABSENT, readable_duration_ms, readable_value
from mailroom.orchestrator.viewer.timeline import Decision


def _share(part_ms: float, whole_ms: float | None) -> str:
    """How much of a decision's latency its provider requests took ("—" without one)."""
    if whole_ms is None or whole_ms <= 0:
        return ABSENT
    return f"{part_ms / whole_ms:.0%}"


def provider_time(d: Decision, used: DecisionUsage | None) -> str:
    """A decision's provider time beside its latency (requests may overlap: the sum may
    exceed it)."""
    if used is None:
        return "no request"
    share = _share(used.provider_time_ms, d.latency_ms)
    return (
        f"{readable_duration_ms(used.provider_time_ms)} ({share} of latency), "
        f"{used.requests} request(s)"
    )


def attempt_usage(result: EpisodeResult, decisions: Sequence[Decision]) -> str:
    usage = result.usage
    if not isinstance(usage, ProviderUsage):
        reason = unmetered_reason(result)
        why = UNMETERED_WORDS[reason] if reason is not None else "not recorded"
        return (
            '<h2>Provider usage</h2><p class="missing usage-unmetered">not metered (null, not '
            f"zero): {esc(why)}</p>"
        )
    cost = usd_text(usage.cost) if usage.cost is not None else f"n/a: {usage.cost_note}"
    verified = {True: "yes", False: "no", None: "nothing to verify"}[usage.model_verified]
    facts = [
        ("provider", usage.provider),
        (
            "requests forwarded",
            f"{usage.provider_requests} ({usage.failed_requests} failed by the provider, "
            f"{usage.other_requests} without a model, {usage.unmetered_requests} without "
            "complete usage)",
        ),
        ("requests refused by the gateway", readable_value(usage.refused_requests)),
        ("input tokens", count_text(usage.input_tokens)),
        ("output tokens", count_text(usage.output_tokens)),
        ("cache-read tokens", count_text(usage.cache_read_tokens)),
        ("cache-write tokens", count_text(usage.cache_write_tokens)),
        ("server tool uses", count_text(usage.server_tool_uses)),
        ("cost (USD)", cost),
        ("declared model", usage.declared_model or ABSENT),
        ("every answer named the declared model", verified),
        ("provider time", readable_duration_ms(usage.provider_time_ms)),
    ]
    models = table(
        (
            "answering model (as the provider named it)",
            "requests",
            "input tokens",
            "output tokens",
            "cache-read tokens",
            "cache-write tokens",
            "cost (USD)",
        ),
        [
            [
                esc(m.model),
                esc(m.requests),
                esc(count_text(m.input_tokens)),
                esc(count_text(m.output_tokens)),
                esc(count_text(m.cache_read_tokens)),
                esc(count_text(m.cache_write_tokens)),
                esc(usd_text(m.cost) if m.cost is not None else f"n/a: {m.cost_note}"),
            ]
            for m in usage.models
        ],
        "usage-models",
    )
    latency = {d.sequence: d.latency_ms for d in decisions}
    per_decision = table(
        (
            "decision",
            "requests",
            "provider time",
            "decision latency",
            "share of latency",
            "input tokens",
            "output tokens",
        ),
        [
            [
                esc(
                    "before the first observation"
                    if u.decision == 0
                    else f"policy call {u.decision}"
                ),
                esc(u.requests),
                esc(readable_duration_ms(u.provider_time_ms)),
                esc(readable_duration_ms(latency.get(u.decision))),
                esc(_share(u.provider_time_ms, latency.get(u.decision))),
                esc(count_text(u.input_tokens)),
                esc(count_text(u.output_tokens)),
            ]
            for u in usage.decisions
        ],
        "usage-decisions",
    )
    return (
        "<h2>Provider usage</h2>"
        f'<table class="identity usage">{fact_rows(facts)}</table>{models}'
        "<h3>Per decision: how much of it was inference</h3>"
        '<p class="note">each forwarded request counts toward the decision whose observation '
        "was pending; its provider time is the request's whole time, so requests that "
        "overlap may add up past the latency</p>"
        f"{per_decision}"
    )
