"""Bounded public feedback after a rejected response.

A pure function of the rejected sequence and the parser's issues: deterministic,
capped in the number of issues and in message length, in the parser's stable order.
The parser's messages quote only protocol constants and the actor's own bytes, so
nothing private can reach the actor through here.
"""

from __future__ import annotations

from collections.abc import Sequence

from .messages import Feedback, FeedbackIssue
from .parser import Issue

MAX_FEEDBACK_ISSUES = 5
MAX_FEEDBACK_MESSAGE = 200


def _printable(text: str) -> str:
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def bounded_feedback(rejected_sequence: int, issues: Sequence[Issue]) -> Feedback:
    """The first `MAX_FEEDBACK_ISSUES` issues, each message cut to `MAX_FEEDBACK_MESSAGE`."""
    if not issues:
        raise ValueError("feedback needs at least one issue")
    shown = issues[:MAX_FEEDBACK_ISSUES]
    return Feedback(
        rejected_sequence=rejected_sequence,
        issues=[
            FeedbackIssue(code=i.code, message=_printable(i.message)[:MAX_FEEDBACK_MESSAGE])
            for i in shown
        ],
        more_issues=len(issues) - len(shown),
    )
