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
from mailroom.orchestrator.records.event_log import DISCLOSING_EVENTS, event_line
from mailroom.orchestrator.records.layout import AttemptPaths
from mailroom.orchestrator.records.private import (
    PRIVATE_DIR_MODE,
    make_private_dir,
    open_private_log,
)
from mailroom.orchestrator.records.result import EpisodeResult


class EventMirror(Protocol):
    """Hears every line of an attempt's event log once it is written (a cluster worker
    forwards them to the run directory on the driver)."""

    def lines(self, attempt_id: str, lines: Sequence[str], *, disclosing: bool) -> None:
        """`disclosing`: the attempt's first disclosing event is among `lines`; return
        only once the copy is durable, for the actor sees an observation next."""


# Room kept for the episode's last records: a run directory that evidence fills up can
# still record how its episodes ended (`_reserve_room`).
RESULT_ROOM_BYTES = 64 << 10


def _reserve_room(directory: Path) -> int | None:
    """An unnamed file in `directory` holding up to RESULT_ROOM_BYTES (as much as there
    is), given back just before the result is written. Unnamed, it is never a file of the
    run, and the kernel frees it with the process, killed or not."""
    try:
        fd = os.open(directory, os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600)
    except OSError:
        return None  # no unnamed files on this filesystem: nothing is reserved
    block = bytes(4096)  # written, not a hole: the room is taken now
    try:
        for _ in range(RESULT_ROOM_BYTES // len(block)):
            os.write(fd, block)
    except OSError:
        pass  # as much as there was
    return fd


class EpisodeEvidence:
    def __init__(self, directory: Path, mirror: EventMirror | None = None) -> None:
        self.directory = directory
        self.paths = AttemptPaths(directory)
        self._mirror = mirror
        self._disclosed = False
        make_private_dir(self.directory)
        self._room: int | None = None
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
        self.release_room()
        publish_json(self.paths.result, result.document())

    def reserve_room(self) -> None:
        """Keep room for the last records (the last events, steps and the result), once
        the episode's first records are written: taken as the control loop starts."""
        if self._room is None:
            self._room = _reserve_room(self.directory)

    def release_room(self) -> None:
        """Give back the room kept for the last records (before they are written)."""
        if self._room is not None:
            os.close(self._room)
            self._room = None

    def close(self) -> None:
        self.release_room()
        if not self._events.closed:
            self.write_deferred_events()
        if not self._steps.closed:
            self.write_steps()
        for log in (self._events, self._steps):
            if not log.closed:
                log.close()
