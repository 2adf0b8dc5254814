"""The private run directory: its manifest, its run-level event log, its attempts and
their results, and the lock a launch or resume holds (where each file lies: `layout`).
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
from mailroom.orchestrator.records.event_log import event_line, logged_disclosure, read_log
from mailroom.orchestrator.records.layout import (
    MANIFEST_FILE,
    AttemptPaths,
    RunPaths,
    split_attempt_id,
)
from mailroom.orchestrator.records.manifest import MANIFEST_SCHEMA
from mailroom.orchestrator.records.private import append_private_line, make_private_dir
from mailroom.orchestrator.records.result import EpisodeResult
from mailroom.orchestrator.records.upgrade import (
    RecordRefusedError,
    upgrade_manifest,
    upgrade_result,
)

_PROC_LOCKS = Path("/proc/locks")


def not_a_run_directory(root: Path) -> str:
    """What a command says of a folder that holds no run."""
    return f"{root} holds no {MANIFEST_FILE}: not a run directory"


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
        return logged_disclosure(AttemptPaths(self.directory).events)


def read_result(path: Path) -> EpisodeResult | CorruptResult:
    """A result document of any version as the current one, or why it cannot be
    trusted."""
    try:
        document = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        return CorruptResult(path, f"unreadable or not JSON: {exc}")
    try:
        return upgrade_result(document)
    except RecordRefusedError as exc:
        return CorruptResult(path, str(exc))


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
        """The run's manifest, of whichever version it was written in, as the current
        version's document; `OSError`, or a `ValueError` for one that is not JSON or a
        `RecordRefusedError` for one that is no manifest (the file is left as it is)."""
        document = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        return upgrade_manifest(document).document()

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Publish the run's manifest: only ever the current version, and a valid one."""
        if manifest.get("schema") != MANIFEST_SCHEMA:
            raise ValueError(f"a manifest is written as {MANIFEST_SCHEMA} only")
        upgrade_manifest(manifest)
        make_private_dir(self.root)
        publish_json(self.manifest_path, manifest)

    def event(self, kind: str, /, **fields: Any) -> None:
        make_private_dir(self.root)
        line = event_line(kind, **fields)
        append_private_line(self.paths.events, line)

    def events(self) -> list[dict[str, Any]]:
        """The run-level events that can be read (a damaged line is passed over)."""
        return read_log(self.paths.events).records

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
