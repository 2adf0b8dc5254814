"""The agent's own account on an attempt's page: its steps, folded under the policy call
they were placed beside (`trace.py`), and what the page says of the account as a whole.
A reading aid, not evidence: every step is the actor's text, shown escaped."""

from __future__ import annotations

from collections.abc import Sequence

from mailroom.orchestrator.actors.agent_trace import Step, Trace, trace_parsers
from mailroom.orchestrator.records.layout import ACTOR_OUTPUT_FILES
from mailroom.orchestrator.viewer.markup import esc
from mailroom.orchestrator.viewer.untrusted_text import clipped_text

ACCOUNT_LABEL = "the actor's own account: not verified"

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
    body = "" if step.text is None else clipped_text(step.text)
    if step.kind == "tool":
        body += clipped_text(step.call) if step.call is not None else ""
        facts = []
        if step.exit_code is not None:
            facts.append(f"exit code {step.exit_code}")
        if step.is_error is not None:
            facts.append("an error" if step.is_error else "no error")
        if step.status and step.kind == "tool":
            facts.append(step.status)
        said = f" ({', '.join(facts)})" if facts else ""
        if step.output is not None and step.output.text:
            body += f'<p class="step-result">result{esc(said)}</p>{clipped_text(step.output)}'
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


def account_details(steps: Sequence[Step]) -> str:
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


def account_group(title: str, steps: Sequence[Step], css: str) -> str:
    if not steps:
        return ""
    return (
        f'<section class="account-group {css}"><h3>{esc(title)}</h3>'
        f"{account_details(steps)}</section>"
    )


def account_notes(trace_format: str | None, trace: Trace | None, *, live: bool) -> str:
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
