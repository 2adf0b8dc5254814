"""A value as a cell of a table the CLI prints: in words, never a Python repr (None,
True, a list). The words are the viewer's (`viewer/readable.py`, their one home); only
what None means differs from table to table."""

from __future__ import annotations

from mailroom.orchestrator.viewer.readable import readable_value


def cell(value: object, *, missing: str = "n/a") -> str:
    """`missing` for None (n/a: not measured or not recorded), otherwise the value as
    `readable_value` writes it (yes/no, numbers without reprs, collections joined)."""
    return missing if value is None else readable_value(value)
