"""The private run directory: its layout, its run-level event log, and what it holds.

RUN/manifest.json          immutable identity of the run
RUN/plan.json              the selection plan, byte for byte
RUN/events.jsonl           run-level events (launches, resumes, audits, disclosures)
RUN/episodes/<attempt>/    one directory per attempt; result.json is written last
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mailroom.mailbox.publish import publish_json
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.episode.evidence import (
    DISCLOSING_EVENTS,
    append_private_line,
    event_line,
    make_private_dir,
)
from mailroom.orchestrator.records.layout import AttemptPaths, RunPaths
from mailroom.orchestrator.results.documents import RESULT_SCHEMA, RESULT_SCHEMAS, EpisodeResult
from pydantic import ValidationError

_PROC_LOCKS = Path("/proc/locks")


class RunLockedError(Exception):
    """Another process is launching into this run directory right now."""


@dataclass(frozen=True)
class CorruptResult:
    path: Path
    reason: str


@dataclass(frozen=True)
class AttemptRecord:
    attempt_id: str
    case_id: str
    attempt: int
    directory: Path
    result: EpisodeResult | CorruptResult | None

    def actor_saw_anything(self) -> bool:
        """Whether an observation of this attempt may have reached its actor: such an
        attempt is never silently re-run."""
        events = AttemptPaths(self.directory).events
        if not events.exists():
            return False
        logged = events.read_bytes()
        # The first publication is announced before it starts (mailbox transport).
        return any(f'"{kind}"'.encode() in logged for kind in DISCLOSING_EVENTS)


def read_result(path: Path) -> EpisodeResult | CorruptResult:
    """A result document, or why it cannot be trusted."""
    try:
        document = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        return CorruptResult(path, f"unreadable or not JSON: {exc}")
    kind = document.get("schema") if isinstance(document, dict) else None
    if kind not in RESULT_SCHEMAS:
        kind = RESULT_SCHEMA
    errors = schema_errors(kind, document)
    if errors:
        return CorruptResult(path, f"does not match {kind}: {errors[0]}")
    try:
        return EpisodeResult.model_validate(document)
    except ValidationError as exc:
        return CorruptResult(path, f"invalid: {exc.errors()[0]['msg']}")


def split_attempt_id(attempt_id: str) -> tuple[str, int] | None:
    case_id, sep, number = attempt_id.rpartition("-a")
    if not sep or not number.isdigit():
        return None
    return case_id, int(number)


class RunDirectory:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths = RunPaths(root)

    @property
    def manifest_path(self) -> Path:
        return self.paths.manifest

    @property
    def plan_path(self) -> Path:
        return self.paths.plan

    @property
    def episodes(self) -> Path:
        return self.paths.episodes

    def episode_dir(self, attempt_id: str) -> Path:
        return self.paths.attempt(attempt_id).root

    def exists(self) -> bool:
        return self.manifest_path.is_file()

    def read_manifest(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        return document

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        make_private_dir(self.root)
        publish_json(self.manifest_path, manifest)

    def event(self, kind: str, /, **fields: Any) -> None:
        make_private_dir(self.root)
        line = event_line(kind, **fields)
        append_private_line(self.paths.events, line)

    def events(self) -> list[dict[str, Any]]:
        path = self.paths.events
        if not path.exists():
            return []
        out: list[dict[str, Any]] = []
        for line in path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
        return out

    def attempts(self) -> list[AttemptRecord]:
        """Every attempt directory, in attempt order per case."""
        records: list[AttemptRecord] = []
        if not self.episodes.is_dir():
            return records
        for directory in sorted(self.episodes.iterdir()):
            parsed = split_attempt_id(directory.name)
            if parsed is None or not directory.is_dir():
                continue
            result_path = AttemptPaths(directory).result
            result = read_result(result_path) if result_path.exists() else None
            records.append(AttemptRecord(directory.name, parsed[0], parsed[1], directory, result))
        records.sort(key=lambda r: (r.case_id, r.attempt))
        return records

    def in_use(self) -> bool:
        """Whether a launch or resume holds this run's lock now.

        Read from /proc/locks, so a reader never takes the lock itself (a launch starting
        at that moment would be refused as "in use").
        """
        try:
            info = os.stat(self.paths.lock)
            held = _PROC_LOCKS.read_text(encoding="ascii")
        except OSError:
            return False
        key = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
        return any(
            len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == key
            for fields in (line.split() for line in held.splitlines())
        )

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """One launch or resume at a time per run directory."""
        make_private_dir(self.root)
        fd = os.open(self.paths.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as exc:
                raise RunLockedError(f"{self.root} is in use by another launch") from exc
            yield
        finally:
            os.close(fd)
