"""The comparison site's HTML: an index of several runs and a page per shared case.

Built on the run site's page frame (`markup.page`: its content security policy, the
site's own style and script) and its escaping (`markup.esc`): every value is escaped where
it enters the markup, and an actor's text only ever appears as element text
(`untrusted_text.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mailroom.orchestrator.records.result import EpisodeResult
from mailroom.orchestrator.results.comparison import Comparison, PairedTally, paired_cost_text
from mailroom.orchestrator.results.proportions import Interval
from mailroom.orchestrator.results.reporter import Tally
from mailroom.orchestrator.viewer.comparison_data import (
    OVERALL,
    ComparedPair,
    ComparedRun,
    ComparisonData,
    SettingsGroup,
    SharedCase,
    Spread,
)
from mailroom.orchestrator.viewer.markup import esc, fact_rows, page
from mailroom.orchestrator.viewer.readable import (
    ABSENT,
    readable_duration_ms,
    readable_duration_s,
    readable_percent,
    readable_value,
)
from mailroom.orchestrator.viewer.timeline import AttemptTimeline
from mailroom.orchestrator.viewer.untrusted_text import untrusted_pre
from mailroom.orchestrator.viewer.wilson_chart import ChartRow, wilson_chart

# The most of one response a shared case's page shows (the attempt's own page has it all).
RESPONSE_SHOWN_CHARS = 4000

SETTING_LABELS = {
    "budget_mode": "budget mode",
    "max_policy_calls": "max policy calls (D)",
    "replan_interval": "replan interval (K)",
    "max_chunk": "max chunk",
    "proprio": "proprioception",
    "invalid_action_handling": "invalid-action handling",
}


def run_href(key: str) -> str:
    return f"runs/{key}/index.html"


def attempt_href(key: str, attempt_id: str) -> str:
    return f"runs/{key}/attempts/{attempt_id}/index.html"


def case_href(case_id: str) -> str:
    return f"cases/{case_id}/index.html"


def interval_text(interval: Interval | None) -> str:
    return "n/a" if interval is None else f"{interval.low:.1%} to {interval.high:.1%}"


def _cell(value: str, field: str = "") -> str:
    named = f' data-field="{esc(field)}"' if field else ""
    return f"<td{named}>{value}</td>"


def _table(headers: Sequence[str], rows: Iterable[str], css: str) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _run_link(run: ComparedRun, root: str = ".") -> str:
    return f'<a class="run-site" href="{root}/{run_href(run.key)}">{esc(run.key)}</a>'


def _runs_table(data: ComparisonData) -> str:
    head = "<th>run</th>" + "".join(f"<th>{_run_link(run)}</th>" for run in data.runs)
    rows = [
        "<tr><th>settings group</th>"
        + "".join(f"<td>{run.group}</td>" for run in data.runs)
        + "</tr>"
    ]
    labels = [label for label, _ in data.runs[0].identity]
    for index, label in enumerate(labels):
        cells = "".join(
            f'<td data-run="{esc(run.key)}">{esc(run.identity[index][1])}</td>' for run in data.runs
        )
        rows.append(f"<tr><th>{esc(label)}</th>{cells}</tr>")
    body = "".join(rows)
    return f'<table class="runs"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _settings_text(group: SettingsGroup) -> str:
    return "; ".join(
        f"{SETTING_LABELS.get(name, name)}: {readable_value(value)}"
        for name, value in group.settings.items()
    )


def _tally(run: ComparedRun, suite: str) -> Tally | None:
    return run.report.overall if suite == OVERALL else run.report.suites.get(suite)


def _spread(spread: Spread | None, unit: str) -> str:
    if spread is None or spread.samples == 0:
        return ABSENT
    shown = readable_duration_ms if unit == "ms" else readable_duration_s
    return f"{shown(spread.median)} / {shown(spread.p95)} (n {spread.samples})"


RATE_HEADERS = (
    "run",
    "selected",
    "completed",
    "success",
    "errored",
    "unattempted",
    "rate / selected",
    "Wilson 95%",
    "rate / completed",
    "Wilson 95%",
    "decision latency median / p95",
    "wall time per episode median / p95",
)


def _rate_row(run: ComparedRun, suite: str, tally: Tally, group: str | None = None) -> str:
    """A run's rates in a suite (or, named by `group`, in one of its categories or cells,
    whose `suite` key is "suite/group")."""
    cells = [
        *([] if group is None else [_cell(esc(group), "group")]),
        _cell(_run_link(run), "run"),
        *(
            _cell(esc(getattr(tally, name)), name)
            for name in ("selected", "completed", "success", "errored", "unattempted")
        ),
        _cell(esc(readable_percent(tally.success_rate_over_selected)), "rate_selected"),
        _cell(esc(interval_text(tally.success_rate_over_selected_interval)), "interval_selected"),
        _cell(esc(readable_percent(tally.success_rate_over_completed)), "rate_completed"),
        _cell(esc(interval_text(tally.success_rate_over_completed_interval)), "interval_completed"),
        _cell(esc(_spread(run.latency_ms.get(suite), "ms")), "latency"),
        _cell(esc(_spread(run.wall_time_s.get(suite), "s")), "wall_time"),
    ]
    data = f'data-run="{esc(run.key)}" data-suite="{esc(suite)}"'
    return f'<tr class="rate" {data}>{"".join(cells)}</tr>'


def _chart_rows(runs: Sequence[tuple[ComparedRun, Tally]]) -> list[ChartRow]:
    rows: list[ChartRow] = []
    for run, tally in runs:
        label = f"{run.key} ({run.report.profile})"
        rows.append(
            ChartRow(
                run.key,
                label,
                "selected",
                tally.success,
                tally.selected,
                tally.success_rate_over_selected,
                tally.success_rate_over_selected_interval,
            )
        )
        rows.append(
            ChartRow(
                run.key,
                label,
                "completed",
                tally.success,
                tally.completed,
                tally.success_rate_over_completed,
                tally.success_rate_over_completed_interval,
            )
        )
    return rows


def _groups_table(runs: Sequence[ComparedRun], suite: str) -> str:
    """A suite's LIBERO-Plus categories or LIBERO-Para cells, each run's rates in each
    ("" for a family without groups)."""
    keys = sorted({k for run in runs for k in run.report.categories if k.startswith(f"{suite}/")})
    rows = [
        _rate_row(run, key, run.report.categories[key], group=key.removeprefix(f"{suite}/"))
        for key in keys
        for run in runs
        if key in run.report.categories
    ]
    if not rows:
        return ""
    return f"<h4>{esc(suite)} by group</h4>" + _table(("group", *RATE_HEADERS), rows, "rates")


def _group_section(data: ComparisonData, group: SettingsGroup) -> str:
    runs = [data.run(key) for key in group.runs]
    suites = [*sorted({suite for run in runs for suite in run.report.suites}), OVERALL]
    parts = [
        f'<section class="group" id="group-{group.number}" data-group="{group.number}">',
        f"<h2>Settings group {group.number}: {len(runs)} run(s)</h2>",
        f'<p class="settings">{esc(_settings_text(group))}</p>',
    ]
    for suite in suites:
        tallied = [(run, t) for run in runs if (t := _tally(run, suite)) is not None]
        parts.append(
            f'<div class="suite" data-suite="{esc(suite)}"><h3>{esc(suite)}</h3>'
            + wilson_chart(f"success rates, {suite}", _chart_rows(tallied))
            + _table(RATE_HEADERS, (_rate_row(run, suite, t) for run, t in tallied), "rates")
            + _groups_table(runs, suite)
            + "</div>"
        )
    parts.append("</section>")
    return "".join(parts)


def _paired_row(name: str, tally: PairedTally) -> str:
    cells = [
        _cell(esc(name), "suite"),
        _cell(esc(tally.paired), "paired"),
        _cell(esc(f"{readable_percent(tally.a.rate)} ({interval_text(tally.a.interval)})"), "a"),
        _cell(esc(f"{readable_percent(tally.b.rate)} ({interval_text(tally.b.interval)})"), "b"),
        _cell(esc(tally.only_a_succeeded), "only_a"),
        _cell(esc(tally.only_b_succeeded), "only_b"),
        _cell(esc(f"{tally.p_value:.3g}"), "p_value"),
        _cell(esc(tally.verdict), "verdict"),
    ]
    return f'<tr class="paired" data-suite="{esc(name)}">{"".join(cells)}</tr>'


def _comparison_notes(comparison: Comparison) -> str:
    notes = [
        f"{comparison.shared_cases} shared case(s); {comparison.only_in_a} only in A, "
        f"{comparison.only_in_b} only in B; {comparison.left_out_unattempted} shared case(s) "
        "left out (unattempted in a run)"
    ]
    if comparison.not_blinded_paired:
        notes.append(f"{comparison.not_blinded_paired} paired case(s) were not blinded in a run")
    for name, (value_a, value_b) in comparison.settings_differences.items():
        notes.append(
            f"settings differ (paired on request): {SETTING_LABELS.get(name, name)}: "
            f"A {readable_value(value_a)}, B {readable_value(value_b)}"
        )
    return "".join(f'<p class="note">{esc(note)}</p>' for note in notes)


def _differences(differences: Mapping[str, list[Any]]) -> str:
    return "; ".join(
        f"{SETTING_LABELS.get(name, name)}: {readable_value(a)} vs {readable_value(b)}"
        for name, (a, b) in differences.items()
    )


def _pair_section(data: ComparisonData, pair: ComparedPair) -> str:
    a, b = data.run(pair.a), data.run(pair.b)
    head = (
        f'<section class="pair" data-a="{esc(a.key)}" data-b="{esc(b.key)}">'
        f"<h3>A {_run_link(a)} ({esc(a.report.profile)}) vs B {_run_link(b)} "
        f"({esc(b.report.profile)})</h3>"
    )
    if pair.comparison is None:
        return (
            f'{head}<p class="warn refused">not paired: they measure different things '
            f"({esc(_differences(pair.refused))})</p></section>"
        )
    comparison = pair.comparison
    rows = []
    for suite, tally in comparison.suites.items():
        rows.append(_paired_row(suite, tally))
        rows += [
            _paired_row(key, grouped)
            for key, grouped in comparison.groups.items()
            if key.startswith(f"{suite}/")
        ]
    rows.append(_paired_row(OVERALL, comparison.overall))
    headers = ("suite", "pairs", "A (Wilson 95%)", "B (Wilson 95%)", "A only", "B only", "p")
    return (
        head
        + _comparison_notes(comparison)
        + _table((*headers, "verdict"), rows, "paired")
        + f'<p class="verdict-overall">overall: {esc(comparison.overall.verdict)}</p>'
        + f'<p class="paired-cost">{esc(paired_cost_text(comparison.cost))}</p></section>'
    )


def _shared_cases(data: ComparisonData) -> str:
    if not data.shared_cases:
        return '<p class="missing">no case has an attempt in two or more runs</p>'
    headers = ["case (side by side)", "suite", *(run.key for run in data.runs)]
    rows = []
    for case in data.shared_cases:
        cells = [
            f'<td><a class="case" href="{esc(case_href(case.case_id))}">'
            f"{esc(case.case_id)}</a></td>",
            f"<td>{esc(case.suite)}</td>",
        ]
        for run in data.runs:
            attempt = run.attempts.get(case.case_id) if run.key in case.runs else None
            if attempt is None:
                cells.append(f"<td>{ABSENT}</td>")
                continue
            href = attempt_href(run.key, attempt.attempt_id)
            cells.append(f'<td><a href="{esc(href)}">{esc(attempt.outcome)}</a></td>')
        rows.append(f'<tr class="shared" data-case="{esc(case.case_id)}">{"".join(cells)}</tr>')
    return _table(headers, rows, "shared")


def index_page(data: ComparisonData) -> str:
    notes = ""
    if data.live:
        notes += '<p class="live">in progress: a launch holds a run; this page reloads</p>'
    if any(not run.report.capability_score for run in data.runs):
        notes += (
            '<p class="warn">a diagnostic profile is among these runs: infrastructure '
            "evidence, not a capability score</p>"
        )
    apart = ""
    if len(data.groups) > 1 and not data.pair_across_settings:
        apart = (
            '<p class="warn apart">runs in different settings groups were measured under '
            "different protocol settings: they are shown apart and never paired "
            "(--pair-across-settings pairs them, naming the differences)</p>"
        )
    pairs = "".join(_pair_section(data, pair) for pair in data.pairs) or (
        '<p class="missing">no two runs share their protocol settings: nothing is paired</p>'
    )
    body = (
        f"<h1>Comparison of {len(data.runs)} runs</h1>{notes}"
        f"<h2>Runs</h2>{_runs_table(data)}{apart}"
        + "".join(_group_section(data, group) for group in data.groups)
        + '<p class="legend">selected = completed + errored + unattempted; completed = '
        "success + failure; intervals: Wilson score, 95%; decision latency over every "
        "served decision and wall time over every episode of the attempts each report "
        "counts (n: how many); cost per episode in USD by each run's price table, over its "
        "priced episodes, and per success, its total over the successes among its metered "
        "episodes (not metered: null, never zero)</p>"
        f"<h2>Pairs (exact McNemar on shared cases)</h2>{pairs}"
        f"<h2>Shared cases</h2>{_shared_cases(data)}"
    )
    return page(f"comparison of {len(data.runs)} runs", body, root=".", live=data.live)


def _response(text: str) -> str:
    shown = text[:RESPONSE_SHOWN_CHARS]
    cut = (
        f'<p class="note">first {len(shown)} of {len(text)} characters shown</p>'
        if len(text) > len(shown)
        else ""
    )
    return f"{untrusted_pre(shown)}{cut}"


def _attempt_column(run: ComparedRun, case: SharedCase, timeline: AttemptTimeline | None) -> str:
    attempt = run.attempts[case.case_id]
    root = "../.."
    href = f"{root}/{attempt_href(run.key, attempt.attempt_id)}"
    facts: list[tuple[str, str]] = [
        ("run", run.report.run_id),
        ("profile", run.report.profile),
        ("settings group", str(run.group)),
        ("outcome", attempt.outcome),
    ]
    result = attempt.result
    if isinstance(result, EpisodeResult):
        facts += [
            ("termination", readable_value(result.termination or result.truncation)),
            ("policy calls", str(result.counters.policy_calls)),
            ("executed controls", str(result.counters.executed_controls)),
            ("wall time", readable_duration_s(result.wall_time_s)),
        ]
    decisions = ""
    if timeline is not None:
        for decision in timeline.decisions:
            response = (
                _response(decision.response.text)
                if decision.response is not None
                else '<p class="missing">no response kept</p>'
            )
            decisions += (
                f'<div class="decision-brief"><h4>policy call {decision.sequence}: '
                f'<span class="verdict">{esc(decision.verdict)}</span> '
                f"({esc(readable_duration_ms(decision.latency_ms))})</h4>{response}</div>"
            )
    return (
        f'<div class="attempt-column" data-run="{esc(run.key)}">'
        f'<h2>{_run_link(run, root)}</h2><p><a class="attempt" href="{esc(href)}">'
        f"{esc(attempt.attempt_id)}</a> (its whole page)</p>"
        f'<table class="identity">{fact_rows(facts)}</table>{decisions}</div>'
    )


def case_page(
    data: ComparisonData, case: SharedCase, timelines: Mapping[str, AttemptTimeline | None]
) -> str:
    """The runs' attempts of one case side by side: what each did and answered (every
    response as text), each linking to its attempt's own page."""
    columns = "".join(_attempt_column(data.run(key), case, timelines.get(key)) for key in case.runs)
    body = (
        '<p><a href="../../index.html">comparison</a></p>'
        f"<h1>{esc(case.case_id)}</h1><p>suite {esc(case.suite)}: the counted attempt of "
        f"each run, side by side</p>"
        f'<div class="side-by-side">{columns}</div>'
    )
    return page(f"case {case.case_id}", body, root="../..", live=data.live)
