"""Private per-episode evidence: an append-only event log, delivered files, the result.

Everything here lives in the orchestrator's run directory, never under the mailbox root.
The result document is written last and atomically: it is the completion marker.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from mailroom.mailbox.publish import publish_bytes, publish_json
from mailroom.orchestrator.results.documents import EpisodeResult

RESULT_FILE = "result.json"
EVENTS_FILE = "events.jsonl"
STEPS_FILE = "steps.jsonl"
# The run directory is the orchestrator's alone (`mailroom` also runs with umask 077).
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def make_private_dir(path: Path) -> None:
    """`mkdir -p path`, and `path` itself owner-only (what lies above it is not ours)."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, PRIVATE_DIR_MODE)


def open_private_log(path: Path) -> int:
    """An append-only descriptor of a private log file (created owner-only)."""
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE_MODE)


def event_line(kind: str, /, **fields: Any) -> str:
    """One record of an event log (a run's, an attempt's): stamped now, keys sorted, one
    line. A record that is not JSON (a NaN, say) raises before anything is written."""
    record = {"t": round(time.time(), 6), "event": kind, **fields}
    return json.dumps(record, sort_keys=True, allow_nan=False) + "\n"


def append_private_line(path: Path, line: str) -> None:
    """Append one whole line to a private log and fsync it: a run's own records (its
    events, an attempt's disclosures) are on disk before the command says so."""
    fd = open_private_log(path)
    try:
        os.write(fd, line.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


class EpisodeEvidence:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        make_private_dir(self.directory)
        (self.directory / "observations").mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
        (self.directory / "responses").mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
        self._events = os.fdopen(open_private_log(directory / EVENTS_FILE), "a", encoding="utf-8")
        self._steps = os.fdopen(open_private_log(directory / STEPS_FILE), "a", encoding="utf-8")
        self._pending_steps: list[dict[str, Any]] = []
        self._deferred_events: list[dict[str, Any]] = []

    def event(self, kind: str, /, **fields: Any) -> None:
        """Append one record to the event log now (after any deferred ones, in order).

        A record that is not JSON (a NaN, say) raises before anything is written."""
        line = event_line(kind, **fields)
        self.write_deferred_events()
        self._events.write(line)
        self._events.flush()

    def defer_event(self, kind: str, /, **fields: Any) -> None:
        """An event stamped now but written with the next `event` (or at `close`).

        For records made on the decision path that nobody needs before the next
        observation is out: the log keeps its order and times, and the writing overlaps
        the actor's work. A crash before the next write loses the deferred records.
        """
        self._deferred_events.append({"t": round(time.time(), 6), "event": kind, **fields})

    def write_deferred_events(self) -> None:
        if self._deferred_events:
            lines = [
                json.dumps(record, sort_keys=True, allow_nan=False) + "\n"
                for record in self._deferred_events
            ]
            self._deferred_events = []
            self._events.writelines(lines)
            self._events.flush()

    def step(self, record: dict[str, Any]) -> None:
        """One executed control (LeRobot-style step row), kept until `write_steps`.

        Step rows are evidence for export, not for resume (which reads the event log):
        the runner writes them once the next observation is out, and `close` writes
        whatever is left.
        """
        self._pending_steps.append(record)

    @property
    def pending_steps(self) -> list[dict[str, Any]]:
        """Step rows kept but not yet written."""
        return list(self._pending_steps)

    def write_steps(self) -> None:
        """Append the step rows kept so far to steps.jsonl, in order."""
        pending, self._pending_steps = self._pending_steps, []
        self._steps.writelines(
            json.dumps(record, sort_keys=True, allow_nan=False) + "\n" for record in pending
        )

    def response_path(self, sequence: int) -> Path:
        return self.directory / "responses" / f"resp-{sequence}.json"

    def keep_observation_file(self, name: str, data: bytes) -> None:
        publish_bytes(self.directory / "observations" / name, data, durable=False)

    def write_private(self, name: str, document: object) -> None:
        publish_json(self.directory / name, document)

    def write_result(self, result: EpisodeResult) -> None:
        publish_json(self.directory / RESULT_FILE, result.document())

    def close(self) -> None:
        if not self._events.closed:
            self.write_deferred_events()
        if not self._steps.closed:
            self.write_steps()
        for log in (self._events, self._steps):
            if not log.closed:
                log.close()
