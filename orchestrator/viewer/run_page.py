"""The run page (the site's index): the run's identity, its success per suite, its
provider usage and every attempt, filterable by suite, outcome and termination."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mailroom.orchestrator.records.result import EpisodeResult, ProviderUsage
from mailroom.orchestrator.records.run_directory import CorruptResult
from mailroom.orchestrator.results.proportions import Interval
from mailroom.orchestrator.results.reporter import Report, simulator_label
from mailroom.orchestrator.results.usage import usd_text
from mailroom.orchestrator.viewer.markup import LIVE_REFRESH_S, esc, page, table
from mailroom.orchestrator.viewer.readable import (
    ABSENT,
    readable_bool,
    readable_duration_s,
    readable_percent,
)
from mailroom.orchestrator.viewer.run_identity import identity_table
from mailroom.orchestrator.viewer.run_usage import usage_section
from mailroom.orchestrator.viewer.timeline import AttemptTimeline


def _interval(interval: Interval | None) -> str:
    if interval is None:
        return "n/a"
    # Breaks after "to" if the cell must wrap, never inside a bound.
    return f"{interval.low:.1%}\u00a0to {interval.high:.1%}"


def _rate(rate: float | None, interval: Interval | None) -> str:
    """A rate and, under it, its interval: one narrow cell (the table fits 1280 px)."""
    return (
        f'{esc(readable_percent(rate))}<br><span class="interval">{esc(_interval(interval))}</span>'
    )


def _suite_rows(report: Report) -> list[list[str]]:
    rows: list[list[str]] = []
    for suite, group, t in report.tally_rows():  # a suite's categories or cells under it
        rows.append(
            [
                # A long category name may break after its suite's slash.
                esc(suite) if group is None else f"{esc(suite)}/<wbr>{esc(group)}",
                *(
                    esc(v)
                    for v in (
                        t.selected,
                        t.completed,
                        t.success,
                        t.failure,
                        t.errored,
                        t.unattempted,
                    )
                ),
                _rate(t.success_rate_over_selected, t.success_rate_over_selected_interval),
                _rate(t.success_rate_over_completed, t.success_rate_over_completed_interval),
                esc(t.not_blinded),
                esc(t.not_confined),
            ]
        )
    return rows


AttemptRow = dict[str, str]
# The attempts table's columns. A row (`attempt_row`) also holds its case's `suite`,
# `task` and `state`, shown together in `case`, and the `instruction` its actor was
# handed, shown under the attempt's name: the table fits a 1280-pixel window.
ATTEMPT_COLUMNS = (
    "attempt",
    "case",
    "outcome",
    # "no" for an attempt disclosed or run not blinded: what the report's "not blinded"
    # counts, attempt by attempt.
    "blinded",
    "termination",
    "policy calls",
    "median latency",
    "controls",
    "simulator",
    "error",
    "latest",
    # Shown only when an attempt of the run was metered (last, so the others keep their
    # places either way).
    "cost",
)


def attempt_row(timeline: AttemptTimeline, latest: bool, blinded: bool = True) -> AttemptRow:
    """The run page's row of an attempt (keys: `ATTEMPT_COLUMNS`); `blinded` is false for
    an attempt the report counts as not blinded (disclosed, or run not blinded)."""
    result = timeline.result
    row: AttemptRow = {
        "attempt": timeline.attempt_id,
        "suite": "",
        "task": "",
        "state": "",
        "case": "",
        "instruction": "",
        "outcome": "running" if result is None else "corrupt",
        "blinded": "",
        "termination": "",
        "policy calls": "",
        "median latency": "",
        "controls": "",
        "cost": "",
        "simulator": "",
        "error": "",
        "latest": "yes" if latest else "superseded",
    }
    if isinstance(result, EpisodeResult):
        row["suite"] = result.case.suite
        row["task"] = str(result.case.task_index)
        row["state"] = str(result.case.init_state_index)
        row["case"] = f"{row['suite']} task {row['task']} state {row['state']}"
        row["instruction"] = result.case.instruction
        row["outcome"] = result.outcome
        row["blinded"] = readable_bool(blinded)
        row["median latency"] = _median_latency(result)
        row["termination"] = result.termination or result.truncation or ""
        row["policy calls"] = str(result.counters.policy_calls)
        row["controls"] = str(result.counters.executed_controls)
        row["cost"] = _attempt_cost(result)
        row["simulator"] = simulator_label(result)
        row["error"] = ", ".join(f"{e.kind}: {e.code}" for e in result.errors)
    elif isinstance(result, CorruptResult):
        row["error"] = result.reason
    return row


def _median_latency(result: EpisodeResult) -> str:
    """The median time an answer took, from its observation's publication (a dash for an
    attempt that answered nothing)."""
    median = result.latency.median_ms
    return ABSENT if median is None else readable_duration_s(median / 1000)


def _attempt_cost(result: EpisodeResult) -> str:
    """An attempt's cost for its row: a dash where nothing was metered (null)."""
    usage = result.usage
    if not isinstance(usage, ProviderUsage):
        return ABSENT
    return usd_text(usage.cost)


FILTERS = ("suite", "outcome", "blinded", "termination")


def run_page(
    report: Report,
    manifest: dict[str, Any],
    rows: Sequence[AttemptRow],
    *,
    live: bool,
    account_note: str | None = None,
) -> str:
    suites = table(
        (
            "suite",
            "selected",
            "completed",
            "success",
            "failure",
            "errored",
            "unattempted",
            "rate / selected, Wilson 95%",
            "rate / completed, Wilson 95%",
            "not blinded",
            "not confined",
        ),
        _suite_rows(report),
        "suites",
    )
    selects = []
    for name in FILTERS:
        values = sorted({r[name] for r in rows})
        options = '<option value="">all</option>' + "".join(
            f'<option value="{esc(v)}">{esc(v or "(none)")}</option>' for v in values
        )
        selects.append(
            f'<label>{esc(name)} <select class="filter" data-filter="{esc(name)}">'
            f"{options}</select></label>"
        )
    metered = any(r["cost"] not in ("", ABSENT) for r in rows)
    columns = ATTEMPT_COLUMNS if metered else ATTEMPT_COLUMNS[:-1]
    body_rows = []
    for r in rows:
        data = " ".join(f'data-{f}="{esc(r[f])}"' for f in FILTERS)
        link = f'<a href="attempts/{esc(r["attempt"])}/index.html">{esc(r["attempt"])}</a>'
        instruction = (
            f'<div class="instruction">{esc(r["instruction"])}</div>' if r["instruction"] else ""
        )
        cells = [
            f"<td>{link}{instruction}</td>",
            *(
                # The error cell may break inside a long code rather than widen the page.
                f'<td class="error">{esc(r[h])}</td>' if h == "error" else f"<td>{esc(r[h])}</td>"
                for h in columns[1:]
            ),
        ]
        body_rows.append(f'<tr class="attempt" {data}>' + "".join(cells) + "</tr>")
    attempts = (
        '<table class="attempts"><thead><tr>'
        + "".join(f"<th>{esc(h)}</th>" for h in columns)
        + "</tr></thead><tbody>"
        + "".join(body_rows)
        + "</tbody></table>"
    )
    notes = ""
    if not report.capability_score:
        notes += (
            '<p class="warn">diagnostic profile: infrastructure evidence, not a capability '
            "score</p>"
        )
    if live:
        notes += f'<p class="live">in progress: this page reloads every {LIVE_REFRESH_S} s</p>'
    if account_note:
        notes += f'<p class="warn account-note">{esc(account_note)}</p>'
    body = (
        f"<h1>{esc(report.run_id)}</h1>{notes}"
        f"<h2>Run</h2>{identity_table(manifest, report)}"
        f"<h2>Success per suite</h2>{suites}"
        '<p class="legend">selected = completed + errored + unattempted; completed = success '
        "+ failure; intervals: Wilson score, 95%</p>"
        f"{usage_section(report)}"
        f'<h2>Attempts (<span id="shown">{len(rows)}</span> of {len(rows)})</h2>'
        f'<div class="filters">{"".join(selects)}</div>{attempts}'
    )
    return page(f"run {report.run_id}", body, root=".", live=live)
