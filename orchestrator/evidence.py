"""Private per-episode evidence: an append-only event log, delivered files, the result.

Everything here lives in the orchestrator's run directory, never under the mailbox root.
The result document is written last and atomically: it is the completion marker.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from mailroom.mailbox.publish import publish_bytes, publish_json

from .results import EpisodeResult

RESULT_FILE = "result.json"
EVENTS_FILE = "events.jsonl"
STEPS_FILE = "steps.jsonl"


class EpisodeEvidence:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "observations").mkdir(exist_ok=True)
        (self.directory / "responses").mkdir(exist_ok=True)
        self._events = (self.directory / EVENTS_FILE).open("a", encoding="utf-8")
        self._steps = (self.directory / STEPS_FILE).open("a", encoding="utf-8")

    def event(self, kind: str, /, **fields: Any) -> None:
        record = {"t": round(time.time(), 6), "event": kind, **fields}
        self._events.write(json.dumps(record, sort_keys=True, allow_nan=False) + "\n")
        self._events.flush()

    def step(self, record: dict[str, Any]) -> None:
        """One executed control (LeRobot-style step row), appended as it happens."""
        self._steps.write(json.dumps(record, sort_keys=True, allow_nan=False) + "\n")

    def response_path(self, sequence: int) -> Path:
        return self.directory / "responses" / f"resp-{sequence}.json"

    def keep_observation_file(self, name: str, data: bytes) -> None:
        publish_bytes(self.directory / "observations" / name, data, durable=False)

    def write_private(self, name: str, document: object) -> None:
        publish_json(self.directory / name, document)

    def write_result(self, result: EpisodeResult) -> None:
        publish_json(self.directory / RESULT_FILE, result.document())

    def close(self) -> None:
        for log in (self._events, self._steps):
            if not log.closed:
                log.close()
