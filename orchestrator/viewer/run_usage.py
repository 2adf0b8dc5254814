"""The run page's provider usage: metered or not (null, never zero), per suite, per
answering model, its cost per episode and per success, the gateway's endings."""

from __future__ import annotations

from mailroom.orchestrator.results.reporter import Report
from mailroom.orchestrator.results.usage import (
    UsageSummary,
    cost_text,
    count_text,
    endings_text,
    host_network_text,
    metered_text,
    usd_text,
    verified_text,
)
from mailroom.orchestrator.viewer.markup import esc, table
from mailroom.orchestrator.viewer.readable import ABSENT


def _usage_row(name: str, u: UsageSummary) -> list[str]:
    if u.metered == 0:
        return [name, esc(f"0 of {u.results}"), *([esc(ABSENT)] * 6)]
    return [
        name,
        esc(f"{u.metered} of {u.results}"),
        esc(count_text(u.provider_requests)),
        esc(count_text(u.input_tokens)),
        esc(count_text(u.output_tokens)),
        esc(usd_text(u.cost_usd)),
        esc(f"{usd_text(u.cost_per_episode_usd)} (n {u.priced})"),
        esc(f"{usd_text(u.cost_per_success_usd)} (n {u.successes_metered})"),
    ]


def _models_table(u: UsageSummary) -> str:
    rows = [
        [
            esc(m.model),
            esc(m.episodes),
            esc(count_text(m.requests)),
            esc(count_text(m.input_tokens)),
            esc(count_text(m.output_tokens)),
            esc(count_text(m.cache_read_tokens)),
            esc(count_text(m.cache_write_tokens)),
            esc(usd_text(m.cost_usd)),
        ]
        for m in u.models
    ]
    headers = (
        "answering model (as the provider named it)",
        "episodes",
        "requests",
        "input tokens",
        "output tokens",
        "cache-read tokens",
        "cache-write tokens",
        "cost (USD)",
    )
    return table(headers, rows, "usage-models")


def usage_section(report: Report) -> str:
    u = report.overall.provider_usage
    notes = [f'<p class="usage-coverage">{esc(metered_text(u))}</p>']
    host = host_network_text(u, report.network)
    if host is not None:
        notes.append(f'<p class="warn host-network">{esc(host)}</p>')
    if report.provider_gateway_problem is not None:
        notes.append(f'<p class="warn">{esc(report.provider_gateway_problem)}</p>')
    if u.metered:
        rows = [
            _usage_row(
                esc(suite) if group is None else f"{esc(suite)}/<wbr>{esc(group)}", t.provider_usage
            )
            for suite, group, t in report.tally_rows()
        ]
        headers = (
            "suite",
            "metered",
            "requests",
            "input tokens",
            "output tokens",
            "cost (USD)",
            "cost per episode",
            "cost per success",
        )
        notes.append(table(headers, rows, "usage"))
        for said in (cost_text(u), verified_text(u)):
            if said is not None:
                notes.append(f'<p class="usage-note">{esc(said)}</p>')
        notes.append(_models_table(u))
    notes += [f'<p class="usage-note">{esc(said)}</p>' for said in endings_text(u)]
    spent = report.superseded_usage
    if spent.metered:
        said = (
            f"superseded attempts (in no rate): {spent.metered} of {spent.results} metered, "
            f"{count_text(spent.provider_requests)} requests, {usd_text(spent.cost_usd)}"
        )
        notes.append(f'<p class="note">{esc(said)}</p>')
    return "<h2>Provider usage</h2>" + "".join(notes)
