"""The table of adversarial response files (tests/support/mailbox_cases.py) is large and
names each case once, and every kind of outcome has its cases."""

from __future__ import annotations

from mailbox_cases import CASES


def test_the_case_table_is_large_and_unambiguous() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)) and len(names) >= 30
    assert {c.expect[0] for c in CASES} == {"accepted", "invalid", "protocol_error", "timeout"}
