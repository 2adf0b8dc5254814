"""Private per-episode evidence: an append-only event log, delivered files, the result.

Everything here lives in the orchestrator's run directory, never under the mailbox root.
The result document is written last and atomically: it is the completion marker.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from mailroom.mailbox.publish import publish_bytes, publish_json
from mailroom.orchestrator.records.layout import AttemptPaths
from mailroom.orchestrator.results.documents import EpisodeResult

# The run directory is the orchestrator's alone (`mailroom` also runs with umask 077).
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
# The events that announce or record an observation going out to the actor: an attempt
# that logged one may have been seen, and is never silently re-run.
DISCLOSING_EVENTS = ("first_observation_publishing", "observation_published")


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
    append_private_lines(path, [line])


def append_private_lines(path: Path, lines: Sequence[str], *, durable: bool = True) -> None:
    """Append whole lines to a private log in one write, fsynced if `durable`."""
    fd = open_private_log(path)
    try:
        data = memoryview("".join(lines).encode("utf-8"))
        while data:
            data = data[os.write(fd, data) :]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


class EventMirror(Protocol):
    """Hears every line of an attempt's event log once it is written (a cluster worker
    forwards them to the run directory on the driver)."""

    def lines(self, attempt_id: str, lines: Sequence[str], *, disclosing: bool) -> None:
        """`disclosing`: the attempt's first disclosing event is among `lines`; return
        only once the copy is durable, for the actor sees an observation next."""


class EpisodeEvidence:
    def __init__(self, directory: Path, mirror: EventMirror | None = None) -> None:
        self.directory = directory
        self.paths = AttemptPaths(directory)
        self._mirror = mirror
        self._disclosed = False
        make_private_dir(self.directory)
        self.paths.observations.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
        self.paths.responses.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
        self._events = os.fdopen(open_private_log(self.paths.events), "a", encoding="utf-8")
        self._steps = os.fdopen(open_private_log(self.paths.steps), "a", encoding="utf-8")
        self._pending_steps: list[dict[str, Any]] = []
        self._deferred_events: list[dict[str, Any]] = []

    def event(self, kind: str, /, **fields: Any) -> None:
        """Append one record to the event log now (after any deferred ones, in order).

        A record that is not JSON (a NaN, say) raises before anything is written."""
        line = event_line(kind, **fields)
        lines = [*self._deferred_lines(), line]
        self._events.writelines(lines)
        self._events.flush()
        disclosing = kind in DISCLOSING_EVENTS and not self._disclosed
        self._disclosed = self._disclosed or disclosing
        self._mirror_lines(lines, disclosing=disclosing)

    def defer_event(self, kind: str, /, **fields: Any) -> None:
        """An event stamped now but written with the next `event` (or at `close`).

        For records made on the decision path that nobody needs before the next
        observation is out: the log keeps its order and times, and the writing overlaps
        the actor's work. A crash before the next write loses the deferred records.
        """
        self._deferred_events.append({"t": round(time.time(), 6), "event": kind, **fields})

    def write_deferred_events(self) -> None:
        lines = self._deferred_lines()
        if lines:
            self._events.writelines(lines)
            self._events.flush()
            self._mirror_lines(lines, disclosing=False)

    def _deferred_lines(self) -> list[str]:
        lines = [
            json.dumps(record, sort_keys=True, allow_nan=False) + "\n"
            for record in self._deferred_events
        ]
        self._deferred_events = []
        return lines

    def _mirror_lines(self, lines: list[str], *, disclosing: bool) -> None:
        if self._mirror is not None:
            self._mirror.lines(self.directory.name, lines, disclosing=disclosing)

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

    @property
    def responses_dir(self) -> Path:
        """Where claimed responses are kept, byte for byte."""
        return self.paths.responses

    def response_path(self, sequence: int) -> Path:
        return self.paths.response(sequence)

    def keep_observation_file(self, name: str, data: bytes) -> None:
        publish_bytes(self.paths.observations / name, data, durable=False)

    def write_private(self, name: str, document: object) -> None:
        publish_json(self.directory / name, document)

    def write_result(self, result: EpisodeResult) -> None:
        publish_json(self.paths.result, result.document())

    def close(self) -> None:
        if not self._events.closed:
            self.write_deferred_events()
        if not self._steps.closed:
            self.write_steps()
        for log in (self._events, self._steps):
            if not log.closed:
                log.close()
