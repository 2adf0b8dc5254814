"""The run page's identity table: what was run, under which settings, confinement,
blinding and provider gateway, as the manifest and the report record them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mailroom.orchestrator.results.reporter import Report
from mailroom.orchestrator.results.usage import usd_text
from mailroom.orchestrator.viewer.markup import fact_rows
from mailroom.orchestrator.viewer.readable import (
    ABSENT,
    NO_LIMIT,
    readable_bool,
    readable_confinement,
    readable_duration_s,
    readable_limit,
    readable_value,
)


def _limit(settings: dict[str, Any], key: str, shown: Callable[[float], str] | None = None) -> str:
    """A setting that None leaves unlimited; a key the manifest lacks is not recorded."""
    return readable_limit(settings[key], shown) if key in settings else ABSENT


def _confinement(confinement: dict[str, Any]) -> str:
    if not confinement:
        return ABSENT
    return readable_confinement(confinement.get("mode"), confinement.get("network"))


def _blinding(blinding: dict[str, Any], report: Report) -> str:
    fresh = blinding.get("fresh_actor_per_episode")
    bits = blinding.get("endpoint_token_bits")
    return (
        f"fresh actor and endpoint per episode: {readable_bool(fresh)}, "
        f"{'endpoint names of unrecorded length' if bits is None else f'{bits}-bit endpoint names'}"
        f"; not blinded attempts: {len(report.not_blinded_attempts)}"
    )


def _gateway(report: Report) -> str:
    """What the run's actors reached their provider through, and its declared budgets."""
    gateway = report.provider_gateway
    if gateway is None:
        return report.provider_gateway_problem or "none: provider usage not metered"
    budgets = gateway.budgets
    limits = [
        f"{name} {readable_limit(value)}"
        for name, value in (
            ("requests", budgets.requests),
            ("input tokens", budgets.input_tokens),
            ("output tokens", budgets.output_tokens),
        )
    ]
    limits.append(f"cost {usd_text(budgets.cost_usd) if budgets.cost_usd else NO_LIMIT}")
    table = gateway.price_table
    whose = " (the coordinator's file)" if table.user_file else ""
    return (
        f"{gateway.provider}; prices from {table.source}, retrieved {table.retrieved}{whose}; "
        f"budgets per episode: {', '.join(limits)}"
    )


def identity_table(manifest: dict[str, Any], report: Report) -> str:
    settings = manifest.get("settings", {})
    protocol = manifest.get("protocol", {})
    confinement = manifest.get("confinement") or {}
    blinding = manifest.get("blinding", {})
    cases = protocol.get("cases")
    pairs = [
        ("run", report.run_id),
        ("profile", report.profile),
        ("capability score", "yes" if report.capability_score else "no (diagnostic)"),
        (
            "plan",
            f"{readable_value(protocol.get('plan_kind', report.plan_kind))}, "
            f"{'cases not recorded' if cases is None else f'{readable_value(cases)} cases'}",
        ),
        ("plan sha256", readable_value(protocol.get("plan_sha256"))),
        ("budget mode", readable_value(settings.get("budget_mode"))),
        ("max policy calls (D)", _limit(settings, "max_policy_calls")),
        ("replan interval (K)", readable_value(settings.get("replan_interval"))),
        (
            "max chunk",
            readable_value(settings.get("max_chunk") or settings.get("replan_interval")),
        ),
        ("invalid-action handling", readable_value(settings.get("invalid_action_handling"))),
        ("proprioception", readable_value(settings.get("proprio"))),
        ("response timeout", _limit(settings, "response_timeout_s", readable_duration_s)),
        ("episode wall time", _limit(settings, "episode_wall_time_s", readable_duration_s)),
        ("confinement", _confinement(confinement)),
        ("provider gateway", _gateway(report)),
        ("blinding", _blinding(blinding, report)),
        ("record", readable_value(manifest.get("record"))),
        ("cameras", readable_value(protocol.get("cameras"))),
    ]
    return f'<table class="identity">{fact_rows(pairs)}</table>'
