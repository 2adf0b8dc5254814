"""An attempt's page: what its result records, its provider usage, its videos and action
chart, its timeline of policy calls (with the agent's own account, where one was
declared), its captured output, and any post-episode diagnostics."""

from __future__ import annotations

from mailroom.orchestrator.actors.agent_trace import Assignment, Trace, assign
from mailroom.orchestrator.records.result import EpisodeResult, ProviderUsage
from mailroom.orchestrator.records.run_directory import CorruptResult
from mailroom.orchestrator.replay.diagnostics import AttemptDiagnostics
from mailroom.orchestrator.results.reporter import simulator_label
from mailroom.orchestrator.viewer.account_section import account_group, account_notes
from mailroom.orchestrator.viewer.attempt_usage import attempt_usage
from mailroom.orchestrator.viewer.chart import action_chart
from mailroom.orchestrator.viewer.decision_section import decision_section
from mailroom.orchestrator.viewer.markup import esc, fact_rows, page, table
from mailroom.orchestrator.viewer.readable import (
    ABSENT,
    readable_bool,
    readable_duration_s,
    readable_value,
)
from mailroom.orchestrator.viewer.timeline import AttemptTimeline
from mailroom.orchestrator.viewer.untrusted_text import shown_text


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
        + table(("goal predicate", "first held", "at end"), rows, "diagnostics")
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
        usage_html = attempt_usage(result, timeline.decisions)
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
            errors = "<h2>Typed errors</h2>" + table(
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
    videos = (
        "".join(
            f'<figure><video controls preload="metadata" width="256" height="256"'
            f' src="{esc(timeline.videos[c])}"></video><figcaption>{esc(c)}</figcaption></figure>'
            for c in timeline.shape.cameras
            if c in timeline.videos
        )
        or '<p class="missing">no videos (--record minimal)</p>'
    )
    problems = "".join(f'<p class="warn">{esc(p)}</p>' for p in timeline.problems)
    placed: Assignment | None = None
    if trace is not None and trace.readable:
        placed = assign(trace.steps, [d.sequence for d in timeline.decisions])
    decisions = "".join(
        decision_section(
            d,
            timeline.shape.cameras,
            None if placed is None else placed.decisions.get(d.sequence, []),
            metered,
        )
        for d in timeline.decisions
    )
    if placed is not None:
        decisions = (
            account_group("Before the first observation", placed.before, "before")
            + decisions
            + account_group("After the episode", placed.after, "after")
        )
    outputs = (
        "".join(
            f"<h3>{esc(name)}</h3>{shown_text(text, name)}"
            for name, text in timeline.outputs.items()
        )
        or '<p class="missing">no output kept</p>'
    )
    body = (
        '<p><a href="../../index.html">run</a></p>'
        f"<h1>{esc(timeline.attempt_id)}</h1>{problems}"
        f'<table class="identity">{fact_rows(summary)}</table>{errors}{usage_html}'
        f'<h2>Videos</h2><div class="videos">{videos}</div>'
        "<h2>Action components over the executed controls</h2>"
        f"{action_chart(timeline.actions, timeline.first_success_control, timeline.shape)}"
        f"<h2>Timeline</h2>{account_notes(trace_format, trace, live=live)}"
        f'<div class="timeline">{decisions}</div>'
        f"<h2>Actor output (captured, untrusted)</h2>{outputs}"
        f"{_diagnostics(diagnostics)}"
    )
    return page(f"attempt {timeline.attempt_id}", body, root="../..", live=live)
