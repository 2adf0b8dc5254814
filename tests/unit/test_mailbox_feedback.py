"""Bounded feedback: deterministic, capped, in stable order, and always deliverable."""

from __future__ import annotations

import re

import pytest
from mailroom.mailbox.feedback import MAX_FEEDBACK_ISSUES, MAX_FEEDBACK_MESSAGE, bounded_feedback
from mailroom.mailbox.messages import Feedback, from_json, to_document
from mailroom.mailbox.parser import InvalidReason, Issue, ProtocolReason
from mailroom.mailbox.publish import document_bytes
from mailroom.mailbox.schemas import load_schema


def _issues(n: int) -> tuple[Issue, ...]:
    return tuple(Issue("out_of_bounds", f"actions[0][{i}] is outside [-1, 1]") for i in range(n))


def test_caps_on_issue_count_and_message_length() -> None:
    feedback = bounded_feedback(4, (Issue("bad_note", "x" * 1000), *_issues(7)))
    assert feedback.rejected_sequence == 4
    assert len(feedback.issues) == MAX_FEEDBACK_ISSUES and feedback.more_issues == 3
    assert len(feedback.issues[0].message) == MAX_FEEDBACK_MESSAGE
    # Stable order: the parser's, first issues first.
    assert [i.message for i in feedback.issues[1:]] == [i.message for i in _issues(4)]


def test_the_same_issues_give_the_same_bytes() -> None:
    issues = (Issue("unknown_field", "unknown field(s): 'z', 'a'"), *_issues(6))
    first = document_bytes(to_document(bounded_feedback(2, issues)))
    assert first == document_bytes(to_document(bounded_feedback(2, issues)))
    assert from_json(Feedback, first) == bounded_feedback(2, issues)


def test_unprintable_characters_are_masked() -> None:
    feedback = bounded_feedback(1, (Issue("unknown_field", "unknown field(s): 'a\x1b[2Jb\n'"),))
    assert feedback.issues[0].message == "unknown field(s): 'a?[2Jb?'"


def test_feedback_needs_an_issue() -> None:
    with pytest.raises(ValueError):
        bounded_feedback(1, ())


def test_every_reason_code_can_be_delivered_and_recorded() -> None:
    """Codes go into feedback (observation schema) and typed errors (result schema)."""
    feedback_code = load_schema("mailroom.observation/v1")["$defs"]["feedback"]["properties"][
        "issues"
    ]["items"]["properties"]["code"]["pattern"]
    error_code = load_schema("mailroom.episode_result/v1")["$defs"]["error"]["properties"]["code"][
        "pattern"
    ]
    codes = [c.value for c in InvalidReason] + [c.value for c in ProtocolReason]
    for code in codes:
        assert re.fullmatch(feedback_code.strip("^$"), code), code
        assert re.fullmatch(error_code.strip("^$"), code), code
    for invalid in InvalidReason:
        bounded_feedback(1, (Issue(invalid.value, "m"),))
