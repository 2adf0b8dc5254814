"""Event logs (a run's, an attempt's) and step rows: one JSON object per line, appended.

Written one way (`event_line`) and read one way (`read_log`): a reader decides what an
unreadable line means to it (the crash's torn last line, a damaged run, a refusal),
never how lines are split and parsed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

# The events that announce or record an observation going out to the actor: an attempt
# that logged one may have been seen, and is never silently re-run.
DISCLOSING_EVENTS = ("first_observation_publishing", "observation_published")


def event_line(kind: str, /, **fields: Any) -> str:
    """One record of an event log (a run's, an attempt's): stamped now, keys sorted, one
    line. A record that is not JSON (a NaN, say) raises before anything is written."""
    record = {"t": round(time.time(), 6), "event": kind, **fields}
    return json.dumps(record, sort_keys=True, allow_nan=False) + "\n"


@dataclass(frozen=True)
class UnreadableLine:
    number: int  # from 1
    why: Literal["is not JSON", "is not an object"]


@dataclass(frozen=True)
class Log:
    """The records of a log, in order, and the lines that were not records."""

    numbered: tuple[tuple[int, dict[str, Any]], ...] = ()
    unreadable: tuple[UnreadableLine, ...] = ()

    @property
    def records(self) -> list[dict[str, Any]]:
        return [record for _, record in self.numbered]

    def before_first_unreadable(self) -> list[dict[str, Any]]:
        """The records before the first line that is not one (after a crash, a torn
        last line: everything before it stands)."""
        if not self.unreadable:
            return self.records
        first = self.unreadable[0].number
        return [record for number, record in self.numbered if number < first]


def read_log(path: Path, *, kinds: Collection[str] | None = None) -> Log:
    """Every line of the log at `path` (none if there is no such file).

    With `kinds`, only events of those kinds are read: a line that names none of them
    is passed over unparsed (a long log is searched quickly).
    """
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return Log()
    marks = None if kinds is None else [f'"{kind}"'.encode() for kind in kinds]
    numbered: list[tuple[int, dict[str, Any]]] = []
    unreadable: list[UnreadableLine] = []
    for number, line in enumerate(data.splitlines(), start=1):
        if marks is not None and not any(mark in line for mark in marks):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            unreadable.append(UnreadableLine(number, "is not JSON"))
            continue
        if not isinstance(record, dict):
            unreadable.append(UnreadableLine(number, "is not an object"))
        elif kinds is None or record.get("event") in kinds:
            numbered.append((number, record))
    return Log(tuple(numbered), tuple(unreadable))


def event_sequence(record: dict[str, Any]) -> int | None:
    """The policy call an event names (its `sequence`, from 1), None if it names none."""
    value = record.get("sequence")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def logged_disclosure(path: Path) -> bool:
    """Whether the event log at `path` names a disclosing event: an observation of its
    attempt may have reached its actor (the first publication is announced before it
    starts). A byte search, so that a torn or damaged log still answers."""
    try:
        logged = path.read_bytes()
    except FileNotFoundError:
        return False
    return any(f'"{kind}"'.encode() in logged for kind in DISCLOSING_EVENTS)
