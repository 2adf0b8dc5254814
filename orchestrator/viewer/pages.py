"""The viewer's HTML: a run page and one page per attempt.

Every value is escaped where it is put into the markup (`esc`), whoever wrote it; an
actor's text only ever appears as element text, never in an attribute that a browser
acts on, a script or a style. Each page also declares a content security policy that
lets it load only the site's own files and run only the site's own script, so that a
mistake in escaping still could not run anything or reach the network.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from html import escape
from typing import Any

from mailroom.orchestrator.records.layout import ACTOR_OUTPUT_FILES
from mailroom.orchestrator.records.result import DecisionUsage, EpisodeResult, ProviderUsage
from mailroom.orchestrator.records.run_directory import CorruptResult
from mailroom.orchestrator.replay.diagnostics import AttemptDiagnostics
from mailroom.orchestrator.results.proportions import Interval
from mailroom.orchestrator.results.reporter import Report, simulator_label
from mailroom.orchestrator.results.usage import (
    UNMETERED_WORDS,
    UsageSummary,
    cost_text,
    count_text,
    endings_text,
    host_network_text,
    metered_text,
    unmetered_reason,
    usd_text,
    verified_text,
)
from mailroom.orchestrator.sim.base import CAMERAS
from mailroom.orchestrator.viewer.chart import action_chart
from mailroom.orchestrator.viewer.readable import (
    ABSENT,
    NO_LIMIT,
    readable_bool,
    readable_confinement,
    readable_duration_ms,
    readable_duration_s,
    readable_limit,
    readable_value,
)
from mailroom.orchestrator.viewer.timeline import AttemptTimeline, Decision, ShownText
from mailroom.orchestrator.viewer.trace import (
    Assignment,
    Clipped,
    Step,
    Trace,
    assign,
    trace_parsers,
)

CSP = (
    "default-src 'none'; img-src 'self'; media-src 'self'; style-src 'self'; "
    "script-src 'self'; base-uri 'none'; form-action 'none'"
)
LIVE_REFRESH_S = 5
ACCOUNT_LABEL = "the actor's own account: not verified"


def esc(value: object) -> str:
    return escape(str(value), quote=True)


def page(title: str, body: str, *, root: str, live: bool) -> str:
    """A whole page; `root` is the relative path to the site's top ("." or "../..")."""
    refresh = f'<meta http-equiv="refresh" content="{LIVE_REFRESH_S}">' if live else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="referrer" content="no-referrer">'
        f"{refresh}<title>{esc(title)}</title>"
        f'<link rel="stylesheet" href="{root}/style.css">'
        f'<script src="{root}/viewer.js" defer></script>'
        f"</head><body>{body}</body></html>\n"
    )


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], css: str = "") -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _percent(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.1%}"


def _interval(interval: Interval | None) -> str:
    if interval is None:
        return "n/a"
    # Breaks after "to" if the cell must wrap, never inside a bound.
    return f"{interval.low:.1%}\u00a0to {interval.high:.1%}"


def _rate(rate: float | None, interval: Interval | None) -> str:
    """A rate and, under it, its interval: one narrow cell (the table fits 1280 px)."""
    return f'{esc(_percent(rate))}<br><span class="interval">{esc(_interval(interval))}</span>'


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


def _identity(manifest: dict[str, Any], report: Report) -> str:
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
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in pairs)
    return f'<table class="identity">{rows}</table>'


AttemptRow = dict[str, str]
ATTEMPT_COLUMNS = (
    "attempt",
    "suite",
    "task",
    "state",
    "outcome",
    "termination",
    "policy calls",
    "controls",
    "simulator",
    "error",
    "latest",
    # Shown only when an attempt of the run was metered (last, so the others keep their
    # places either way).
    "cost",
)


def attempt_row(timeline: AttemptTimeline, latest: bool) -> AttemptRow:
    """The run page's row of an attempt (keys: `ATTEMPT_COLUMNS`)."""
    result = timeline.result
    row: AttemptRow = {
        "attempt": timeline.attempt_id,
        "suite": "",
        "task": "",
        "state": "",
        "outcome": "running" if result is None else "corrupt",
        "termination": "",
        "policy calls": "",
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
        row["outcome"] = result.outcome
        row["termination"] = result.termination or result.truncation or ""
        row["policy calls"] = str(result.counters.policy_calls)
        row["controls"] = str(result.counters.executed_controls)
        row["cost"] = _attempt_cost(result)
        row["simulator"] = simulator_label(result)
        row["error"] = ", ".join(f"{e.kind}: {e.code}" for e in result.errors)
    elif isinstance(result, CorruptResult):
        row["error"] = result.reason
    return row


def _attempt_cost(result: EpisodeResult) -> str:
    """An attempt's cost for its row: a dash where nothing was metered (null)."""
    usage = result.usage
    if not isinstance(usage, ProviderUsage):
        return ABSENT
    return usd_text(usage.cost)


FILTERS = ("suite", "outcome", "termination")


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
    return _table(headers, rows, "usage-models")


def _usage_section(report: Report) -> str:
    """The run's provider usage: metered or not (null, never zero), per suite, per
    answering model, its cost per episode and per success, the gateway's endings."""
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
        notes.append(_table(headers, rows, "usage"))
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


def run_page(
    report: Report,
    manifest: dict[str, Any],
    rows: Sequence[AttemptRow],
    *,
    live: bool,
    account_note: str | None = None,
) -> str:
    suites = _table(
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
        cells = [
            f"<td>{link}</td>",
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
        f"<h2>Run</h2>{_identity(manifest, report)}"
        f"<h2>Success per suite</h2>{suites}"
        '<p class="legend">selected = completed + errored + unattempted; completed = success '
        "+ failure; intervals: Wilson score, 95%</p>"
        f"{_usage_section(report)}"
        f'<h2>Attempts (<span id="shown">{len(rows)}</span> of {len(rows)})</h2>'
        f'<div class="filters">{"".join(selects)}</div>{attempts}'
    )
    return page(f"run {report.run_id}", body, root=".", live=live)


def _pre(shown: ShownText | None, what: str) -> str:
    if shown is None:
        return f'<p class="missing">no {esc(what)} kept</p>'
    note = (
        f'<p class="note">first {len(shown.text.encode())} of {shown.size} bytes shown</p>'
        if shown.truncated
        else ""
    )
    return f'<pre class="untrusted">{esc(shown.text)}</pre>{note}'


def _feedback(feedback: Any) -> str:
    if feedback is None:
        return "none"
    return f'<pre class="untrusted">{esc(json.dumps(feedback, indent=1, sort_keys=True))}</pre>'


def _clipped(shown: Clipped) -> str:
    note = (
        f'<p class="note">cut: the first {len(shown.text)} of {len(shown.text) + shown.omitted}'
        " characters shown</p>"
        if shown.cut
        else ""
    )
    return f'<pre class="untrusted">{esc(shown.text)}</pre>{note}'


STEP_HEADS = {
    "text": "the agent wrote",
    "thinking": "the agent's thinking",
    "input": "handed to the agent",
    "result": "the agent's final result",
    "error": "an error, as the agent reports it",
    "note": "note",
}


def _step(step: Step) -> str:
    if step.kind == "tool":
        head = f"tool call: {step.tool or '(unnamed)'}"
    else:
        head = STEP_HEADS.get(step.kind, step.kind)
    if step.kind == "result" and step.status:
        head += f" ({step.status})"
    body = "" if step.text is None else _clipped(step.text)
    if step.kind == "tool":
        body += _clipped(step.call) if step.call is not None else ""
        facts = []
        if step.exit_code is not None:
            facts.append(f"exit code {step.exit_code}")
        if step.is_error is not None:
            facts.append("an error" if step.is_error else "no error")
        if step.status and step.kind == "tool":
            facts.append(step.status)
        said = f" ({', '.join(facts)})" if facts else ""
        if step.output is not None and step.output.text:
            body += f'<p class="step-result">result{esc(said)}</p>{_clipped(step.output)}'
        elif step.output is not None:
            body += f'<p class="step-result">result{esc(said)}: empty</p>'
        else:
            body += f'<p class="missing">no result in the account{esc(said)}</p>'
    elif step.kind == "result" and step.is_error:
        body += '<p class="warn">the agent reports an error</p>'
    account = ACTOR_OUTPUT_FILES["stdout"]
    return (
        f'<div class="step step-{esc(step.kind)}"><p class="step-head">{esc(head)} '
        f'<span class="line">({account} line {step.line})</span></p>{body}</div>'
    )


def _account(steps: Sequence[Step]) -> str:
    """A decision's (or a group's) steps of the agent's own account, folded."""
    shown = "".join(_step(s) for s in steps) or (
        '<p class="missing">no step of the account was placed here</p>'
    )
    return (
        f'<details class="account"><summary>{esc(ACCOUNT_LABEL)}</summary>'
        f'<p class="note">{len(steps)} step(s), placed by the mailbox files their commands '
        "name: a reading aid, not evidence</p>"
        f"{shown}</details>"
    )


def _account_group(title: str, steps: Sequence[Step], css: str) -> str:
    if not steps:
        return ""
    return f'<section class="account-group {css}"><h3>{esc(title)}</h3>{_account(steps)}</section>'


def _share(part_ms: float, whole_ms: float | None) -> str:
    """How much of a decision's latency its provider requests took ("—" without one)."""
    if whole_ms is None or whole_ms <= 0:
        return ABSENT
    return f"{part_ms / whole_ms:.0%}"


def _provider_time(d: Decision, used: DecisionUsage | None) -> str:
    """A decision's provider time beside its latency (requests may overlap: the sum may
    exceed it)."""
    if used is None:
        return "no request"
    share = _share(used.provider_time_ms, d.latency_ms)
    return (
        f"{readable_duration_ms(used.provider_time_ms)} ({share} of latency), "
        f"{used.requests} request(s)"
    )


def _decision(
    d: Decision,
    account: Sequence[Step] | None = None,
    usage: ProviderUsage | None = None,
) -> str:
    images = (
        "".join(
            f'<figure><img src="{esc(d.images[c])}" alt="{esc(c)} at observation {d.sequence}"'
            f' width="256" height="256"><figcaption>{esc(c)}</figcaption></figure>'
            for c in CAMERAS
            if c in d.images
        )
        or '<p class="missing">images not kept (--record minimal)</p>'
    )
    reasons = f" ({esc(', '.join(d.reasons))})" if d.reasons else ""
    executed = (
        f"{len(d.executed_prefix)} control(s), {d.executed_controls_total} in all"
        if d.executed_controls_total is not None
        else "none"
    )
    prefix = (
        f'<pre class="prefix">{esc(json.dumps(d.executed_prefix))}</pre>'
        if d.executed_prefix
        else ""
    )
    success = ' <span class="success">native success</span>' if d.native_success else ""
    counters = (
        ", ".join(f"{k} {readable_value(v)}" for k, v in sorted(d.counters_shown.items())) or ABSENT
    )
    headers = ["verdict", "executed", "latency", "queueing delay", "processing"]
    cells = [
        f'<span class="verdict">{esc(d.verdict)}</span>{reasons}{success}',
        esc(executed),
        esc(readable_duration_ms(d.latency_ms)),
        esc(readable_duration_ms(d.queue_delay_ms)),
        esc(readable_duration_ms(d.processing_ms)),
    ]
    if usage is not None:
        used = next((u for u in usage.decisions if u.decision == d.sequence), None)
        headers.append("provider time")
        cells.append(f'<span class="provider-time">{esc(_provider_time(d, used))}</span>')
    facts = _table(headers, [cells], "facts")
    return (
        f'<section class="decision" id="decision-{d.sequence}">'
        f"<h3>Policy call {d.sequence}</h3>"
        f'<div class="images">{images}</div>'
        f'<p class="counters">counters this observation showed: {esc(counters)}</p>'
        f"<h4>feedback this observation carried</h4>{_feedback(d.feedback_shown)}"
        f"<h4>response, verbatim</h4>{_pre(d.response, 'response')}"
        f"{facts}{prefix}"
        f"<h4>feedback the actor then saw</h4>{_feedback(d.feedback_after)}"
        f"{'' if account is None else _account(account)}"
        "</section>"
    )


def _diagnostics(diagnostics: AttemptDiagnostics | None) -> str:
    if diagnostics is None:
        return ""
    rows = [
        [
            esc(p.predicate),
            esc("never" if p.first_held_control is None else f"control {p.first_held_control}"),
            esc("held" if p.held_at_end else "not held"),
        ]
        for p in diagnostics.predicates
    ]
    return (
        '<h2 class="diagnostics">Post-episode diagnostics (from mailroom replay): never a '
        "score</h2>"
        f'<p class="note">replay: {esc(diagnostics.replay_verdict)}; goal predicates '
        f"evaluated after settling (control 0) and after each of "
        f"{esc(diagnostics.controls_evaluated)} controls</p>"
        + _table(("goal predicate", "first held", "at end"), rows, "diagnostics")
    )


def _account_notes(trace_format: str | None, trace: Trace | None, *, live: bool) -> str:
    """What the page says of the agent's own account as a whole ("" if it has none)."""
    if trace_format is None:
        return ""
    if trace is None:
        return (
            f'<p class="missing">the actor\'s own account ({esc(trace_format)}): no captured '
            "output kept</p>"
        )
    problems = "; ".join(trace.problems)
    if not trace.readable and live and trace_format in trace_parsers():
        return (
            f'<p class="missing">the actor\'s own account ({esc(trace_format)}): no step of it '
            "read yet</p>"
        )
    if not trace.readable:
        why = problems or "it holds no event of that format"
        return (
            f'<p class="warn account-note">the actor\'s own account ({esc(trace_format)}) could '
            f"not be read: {esc(why)}. Its captured output is shown as it is below.</p>"
        )
    said = f"; {esc(problems)}" if problems else ""
    return (
        f'<p class="note account-note">the actor\'s own account ({esc(trace_format)}, '
        f"{len(trace.steps)} steps) is shown under each policy call: not verified{said}</p>"
    )


def _attempt_usage(result: EpisodeResult, decisions: Sequence[Decision]) -> str:
    """What the gateway metered of the attempt's actor, per answering model and per
    decision (the provider time beside the decision's latency), or why nothing did."""
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
    table = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in facts)
    models = _table(
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
    per_decision = _table(
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
        f'<table class="identity usage">{table}</table>{models}'
        "<h3>Per decision: how much of it was inference</h3>"
        '<p class="note">each forwarded request counts toward the decision whose observation '
        "was pending; its provider time is the request's whole time, so requests that "
        "overlap may add up past the latency</p>"
        f"{per_decision}"
    )


def _never(value: int | None) -> str:
    """A first success's control or call: "never" where the episode had none."""
    return "never" if value is None else readable_value(value)


def _simulator(result: EpisodeResult) -> str:
    """How the attempt's simulator was held, for its page (docs/parking.md)."""
    if result.simulator is None:
        return f"{simulator_label(result)} (a result before v5 does not say)"
    return simulator_label(result)


def attempt_page(
    timeline: AttemptTimeline,
    *,
    live: bool,
    diagnostics: AttemptDiagnostics | None = None,
    trace_format: str | None = None,
    trace: Trace | None = None,
) -> str:
    result = timeline.result
    summary: list[tuple[str, str]] = [("attempt", timeline.attempt_id)]
    errors = ""
    usage_html = ""
    metered: ProviderUsage | None = None
    if isinstance(result, EpisodeResult):
        usage_html = _attempt_usage(result, timeline.decisions)
        metered = result.usage if isinstance(result.usage, ProviderUsage) else None
        c = result.counters
        summary += [
            ("case", result.case_id),
            ("task", f"{result.case.suite} {result.case.task_index}: {result.case.task_name}"),
            ("instruction", result.case.instruction),
            ("initial state, seed", f"{result.case.init_state_index}, {result.case.seed}"),
            ("outcome", result.outcome),
            ("termination", result.termination or ABSENT),
            ("truncation", result.truncation or ABSENT),
            ("policy calls", readable_value(c.policy_calls)),
            ("action decisions", readable_value(c.action_decisions)),
            ("rejected responses", readable_value(c.rejected_responses)),
            ("stop responses", readable_value(c.stop_responses)),
            ("executed controls", readable_value(c.executed_controls)),
            ("settling controls", readable_value(c.settling_controls)),
            ("first success control", _never(c.first_success_control)),
            ("first success policy call", _never(c.first_success_policy_call)),
            ("blinded", readable_bool(result.blinded)),
            ("confined", readable_bool(result.confined)),
            ("simulator", _simulator(result)),
            ("wall time", readable_duration_s(result.wall_time_s)),
        ]
        if result.errors:
            errors = "<h2>Typed errors</h2>" + _table(
                ("kind", "code", "policy call", "message"),
                [
                    [esc(e.kind), esc(e.code), esc(readable_value(e.policy_call)), esc(e.message)]
                    for e in result.errors
                ],
                "errors",
            )
    elif isinstance(result, CorruptResult):
        summary.append(("result", f"corrupt: {result.reason}"))
    else:
        summary.append(("result", "none yet (running, or cut short before one was written)"))
    facts = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in summary)
    videos = (
        "".join(
            f'<figure><video controls preload="metadata" width="256" height="256"'
            f' src="{esc(timeline.videos[c])}"></video><figcaption>{esc(c)}</figcaption></figure>'
            for c in CAMERAS
            if c in timeline.videos
        )
        or '<p class="missing">no videos (--record minimal)</p>'
    )
    problems = "".join(f'<p class="warn">{esc(p)}</p>' for p in timeline.problems)
    placed: Assignment | None = None
    if trace is not None and trace.readable:
        placed = assign(trace.steps, [d.sequence for d in timeline.decisions])
    decisions = "".join(
        _decision(d, None if placed is None else placed.decisions.get(d.sequence, []), metered)
        for d in timeline.decisions
    )
    if placed is not None:
        decisions = (
            _account_group("Before the first observation", placed.before, "before")
            + decisions
            + _account_group("After the episode", placed.after, "after")
        )
    outputs = (
        "".join(
            f"<h3>{esc(name)}</h3>{_pre(text, name)}" for name, text in timeline.outputs.items()
        )
        or '<p class="missing">no output kept</p>'
    )
    body = (
        '<p><a href="../../index.html">run</a></p>'
        f"<h1>{esc(timeline.attempt_id)}</h1>{problems}"
        f'<table class="identity">{facts}</table>{errors}{usage_html}'
        f'<h2>Videos</h2><div class="videos">{videos}</div>'
        "<h2>Action components over the executed controls</h2>"
        f"{action_chart(timeline.actions, timeline.first_success_control)}"
        f"<h2>Timeline</h2>{_account_notes(trace_format, trace, live=live)}"
        f'<div class="timeline">{decisions}</div>'
        f"<h2>Actor output (captured, untrusted)</h2>{outputs}"
        f"{_diagnostics(diagnostics)}"
    )
    return page(f"attempt {timeline.attempt_id}", body, root="../..", live=live)
