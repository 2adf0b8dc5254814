"""One policy call on an attempt's page: the images the actor saw, the feedback and
counters its observation carried, its response verbatim (untrusted), what was executed,
its latency and provider time, and the agent's own account placed beside it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mailroom.orchestrator.actors.agent_trace import Step
from mailroom.orchestrator.records.result import ProviderUsage
from mailroom.orchestrator.viewer.account_section import account_details
from mailroom.orchestrator.viewer.attempt_usage import provider_time
from mailroom.orchestrator.viewer.markup import esc, table
from mailroom.orchestrator.viewer.readable import ABSENT, readable_duration_ms, readable_value
from mailroom.orchestrator.viewer.timeline import Decision
from mailroom.orchestrator.viewer.untrusted_text import shown_text, untrusted_pre


def _feedback(feedback: Any) -> str:
    if feedback is None:
        return "none"
    return untrusted_pre(json.dumps(feedback, indent=1, sort_keys=True))


def decision_section(
    d: Decision,
    cameras: Sequence[str],
    account: Sequence[Step] | None = None,
    usage: ProviderUsage | None = None,
) -> str:
    images = (
        "".join(
            f'<figure><img src="{esc(d.images[c])}" alt="{esc(c)} at observation {d.sequence}"'
            f' width="256" height="256"><figcaption>{esc(c)}</figcaption></figure>'
            for c in cameras
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
        cells.append(f'<span class="provider-time">{esc(provider_time(d, used))}</span>')
    facts = table(headers, [cells], "facts")
    return (
        f'<section class="decision" id="decision-{d.sequence}">'
        f"<h3>Policy call {d.sequence}</h3>"
        f'<div class="images">{images}</div>'
        f'<p class="counters">counters this observation showed: {esc(counters)}</p>'
        f"<h4>feedback this observation carried</h4>{_feedback(d.feedback_shown)}"
        f"<h4>response, verbatim</h4>{shown_text(d.response, 'response')}"
        f"{facts}{prefix}"
        f"<h4>feedback the actor then saw</h4>{_feedback(d.feedback_after)}"
        f"{'' if account is None else account_details(account)}"
        "</section>"
    )
