"""Recording that blinding failed: disclosures of a leak, and operator cutovers.

Both are run events, appended; the immutable manifest is never touched. A disclosed
attempt stays in the results, marked not blinded, and is never re-run. A disclosure is
also appended to the attempt's own `disclosures.jsonl`, so the attempt's directory
alone says it was not blinded.
"""

from __future__ import annotations

from typing import Any

from mailroom.orchestrator.records.disclosures import LEAK_DISCLOSED
from mailroom.orchestrator.records.event_log import event_line
from mailroom.orchestrator.records.layout import AttemptPaths
from mailroom.orchestrator.records.private import append_private_line
from mailroom.orchestrator.records.run_directory import AttemptRecord, RunDirectory
from mailroom.timestamps import utc_timestamp

MAX_NOTE = 2000


class UnknownAttemptError(LookupError):
    """The target names neither an attempt of the run nor a case with an attempt."""


class NoteError(ValueError):
    """A note that is empty or too long. The message is a predicate ("must say
    something"), so that a command can put the name of its own option before it."""


def bounded_note(text: str) -> str:
    """The note as recorded: stripped, not empty, at most `MAX_NOTE` characters."""
    note = text.strip()
    if not note:
        raise NoteError("must say something")
    if len(note) > MAX_NOTE:
        raise NoteError(f"is at most {MAX_NOTE} characters")
    return note


def resolve_attempt(run: RunDirectory, target: str) -> AttemptRecord:
    """An attempt id names itself; a case id names the case's latest attempt."""
    records = run.attempts()
    for record in records:
        if record.attempt_id == target:
            return record
    of_case = [r for r in records if r.case_id == target]
    if of_case:
        return max(of_case, key=lambda r: r.attempt)
    raise UnknownAttemptError(
        f"{target!r} is neither an attempt of this run nor a case with an attempt "
        f"({len(records)} attempts under {run.episodes})"
    )


def record_disclosure(run: RunDirectory, record: AttemptRecord, note: str) -> dict[str, Any]:
    """A `leak_disclosed` run event, and the same line in the attempt's own log.

    `note` is as `bounded_note` gives it.
    """
    fields: dict[str, Any] = {
        "attempt_id": record.attempt_id,
        "case_id": record.case_id,
        "note": note,
        "at": utc_timestamp(),
    }
    run.event(LEAK_DISCLOSED, **fields)
    line = event_line(LEAK_DISCLOSED, **fields)
    append_private_line(AttemptPaths(record.directory).disclosures, line)
    return fields


def record_cutover(run: RunDirectory, note: str) -> None:
    """An `operator_cutover` run event: a prospective correction, apart from the manifest.

    `note` is as `bounded_note` gives it.
    """
    run.event("operator_cutover", note=note, at=utc_timestamp())
