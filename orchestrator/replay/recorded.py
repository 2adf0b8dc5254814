"""What a replay needs of an attempt, read from its evidence, or why it cannot be had.

An attempt is replayable from its result document (the case's identity, its file
hashes, the seed, the control cap, the counters and outcome) and its event log (every
delivered observation's image hashes and every decision's executed prefix). Both are
kept in every record mode, so `--record minimal` runs replay too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mailroom.orchestrator.families.base import UnknownBenchmarkError
from mailroom.orchestrator.families.registry import family
from mailroom.orchestrator.records.event_log import read_log
from mailroom.orchestrator.records.layout import EVENTS_FILE, RESULT_FILE, AttemptPaths
from mailroom.orchestrator.records.result import EpisodeResult
from mailroom.orchestrator.records.run_directory import CorruptResult, read_result


class NotReplayableError(ValueError):
    """The attempt's evidence lacks what a replay needs (the message says what)."""


@dataclass(frozen=True)
class RecordedDecision:
    sequence: int
    executed_prefix: list[list[float]]
    native_success: bool


@dataclass
class RecordedAttempt:
    attempt_id: str
    result: EpisodeResult
    # sequence -> camera -> sha256 of the PNG delivered
    observations: dict[int, dict[str, str]] = field(default_factory=dict)
    decisions: list[RecordedDecision] = field(default_factory=list)


def _events(path: Path) -> list[dict[str, Any]]:
    log = read_log(path)
    for line in log.unreadable:
        if line.why == "is not JSON":
            raise NotReplayableError(f"{EVENTS_FILE} line {line.number} is not JSON")
    return log.records


def _prefix(value: Any, where: str, dimension: int) -> list[list[float]]:
    ok = isinstance(value, list) and all(
        isinstance(row, list)
        and len(row) == dimension
        and all(isinstance(x, int | float) and not isinstance(x, bool) for x in row)
        for row in value
    )
    if not ok:
        raise NotReplayableError(
            f"{where}: its executed prefix is not a list of {dimension}-vectors"
        )
    return [[float(x) for x in row] for row in value]


def read_recorded(directory: Path) -> RecordedAttempt:
    """Raises `NotReplayableError` naming the missing or unreadable evidence."""
    paths = AttemptPaths(directory)
    result_path, events_path = paths.result, paths.events
    if not result_path.is_file():
        raise NotReplayableError(f"no {RESULT_FILE}: the attempt never finished")
    result = read_result(result_path)
    if isinstance(result, CorruptResult):
        raise NotReplayableError(f"{RESULT_FILE} cannot be trusted: {result.reason}")
    if result.outcome == "error" and any(e.kind == "interrupted" for e in result.errors):
        raise NotReplayableError("the attempt was interrupted: its evidence is not whole")
    if not events_path.is_file():
        raise NotReplayableError(f"no {EVENTS_FILE}: the executed actions are not on record")
    try:
        dimension = family(result.case.benchmark).action_spec.dimension
    except UnknownBenchmarkError as exc:
        raise NotReplayableError(str(exc)) from exc
    recorded = RecordedAttempt(directory.name, result)
    for record in _events(events_path):
        kind, sequence = record.get("event"), record.get("sequence")
        if not isinstance(sequence, int) or isinstance(sequence, bool):
            continue
        if kind == "observation_published":
            hashes = record.get("image_sha256")
            if not isinstance(hashes, dict) or not hashes:
                raise NotReplayableError(f"observation {sequence} has no image hashes")
            recorded.observations[sequence] = {str(k): str(v) for k, v in hashes.items()}
        elif kind == "actions_executed":
            recorded.decisions.append(
                RecordedDecision(
                    sequence,
                    _prefix(record.get("executed_prefix"), f"decision {sequence}", dimension),
                    record.get("native_success") is True,
                )
            )
    if not recorded.observations:
        raise NotReplayableError("no observation was published: nothing to check against")
    executed = sum(len(d.executed_prefix) for d in recorded.decisions)
    if executed != result.counters.executed_controls:
        raise NotReplayableError(
            f"the event log holds {executed} executed controls, the result "
            f"{result.counters.executed_controls}: the log is not whole"
        )
    return recorded
