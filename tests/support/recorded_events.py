"""A run's and an attempt's events, read back through the project's one reader
(`mailroom.orchestrator.records.event_log.read_log`).

A test reads a finished log whole: a log that is not there, or a line of it that is not
a record, fails the test (`logged_events`). A log still being written is read as a crash
leaves one: the records before its first unreadable line, its torn last line left out
(`live_events`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mailroom.orchestrator.records.event_log import read_log
from mailroom.orchestrator.records.layout import AttemptPaths, RunPaths


def logged_events(log: Path, *kinds: str) -> list[dict[str, Any]]:
    """Every record of the finished event log at `log`, in order; with `kinds`, only
    the events of those kinds."""
    assert log.is_file(), f"no event log at {log}"
    read = read_log(log, kinds=kinds or None)
    assert read.unreadable == (), f"{log}: {read.unreadable}"
    return read.records


def attempt_events(attempt: Path, *kinds: str) -> list[dict[str, Any]]:
    """The events of the attempt whose folder is `attempt` (its `events.jsonl`)."""
    return logged_events(AttemptPaths(attempt).events, *kinds)


def episode_events(run_dir: Path, attempt_id: str, *kinds: str) -> list[dict[str, Any]]:
    """The events of attempt `attempt_id` of the run at `run_dir`."""
    return logged_events(RunPaths(run_dir).attempt(attempt_id).events, *kinds)


def run_events(run_dir: Path, *kinds: str) -> list[dict[str, Any]]:
    """The run-level events of the run at `run_dir` (launches, resumes, audits, ...)."""
    return logged_events(RunPaths(run_dir).events, *kinds)


def live_events(log: Path, *kinds: str) -> list[dict[str, Any]]:
    """The records of an event log still being written: those before its first line that
    is not one (a torn last line); none before the log exists."""
    return read_log(log, kinds=kinds or None).before_first_unreadable()
