"""What an attempt's evidence shows, read and checked once for every export that shows an
attempt step by step (Rerun, LeRobot, ATIF).

An attempt is trusted only whole: a result document naming it, an event log with no
unreadable line, steps the runner could have written and as many as the result counts,
and each image the bytes its observation recorded as delivered (their sha256). Anything
less raises EvidenceError, and the export skips the attempt and lists it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from mailroom.hashing import sha256_bytes
from mailroom.orchestrator.records.event_log import event_sequence, read_log
from mailroom.orchestrator.records.layout import AttemptPaths
from mailroom.orchestrator.records.result import EpisodeResult
from mailroom.orchestrator.records.run_directory import (
    AttemptRecord,
    CorruptResult,
    RunDirectory,
)
from mailroom.orchestrator.results.export import ExportError
from mailroom.orchestrator.results.steps_file import StepsFileError, read_steps
from mailroom.orchestrator.sim.specs import ActionSpec

# The most of a response read to find its note (the mailbox bounds responses below this).
MAX_RESPONSE_BYTES = 4 * 1024 * 1024


class UnknownAttemptError(ExportError):
    """`--attempt` names no attempt of the run."""


class EvidenceError(ValueError):
    """An attempt's evidence cannot be trusted; the attempt is skipped and listed."""


@dataclass(frozen=True)
class DeliveredObservation:
    sequence: int
    control: int
    image_sha256: dict[str, str]  # camera -> the sha256 recorded at publication
    published_at: float | None = None  # unix seconds, as its event recorded


@dataclass(frozen=True)
class JudgedDecision:
    sequence: int
    control: int
    verdict: str
    warning: bool
    feedback: str | None  # JSON text
    note: str | None
    claimed_at: float | None = None  # unix seconds the response was claimed or refused
    latency_ms: float | None = None  # from the observation's publication to the claim


@dataclass(frozen=True)
class AttemptEvidence:
    paths: AttemptPaths
    result: EpisodeResult
    cameras: tuple[str, ...]
    action_layout: tuple[str, ...]
    keeps_images: bool
    observations: list[DeliveredObservation]
    decisions: list[JudgedDecision]
    actions: npt.NDArray[np.float32]  # (controls, len(action_layout))
    states: npt.NDArray[np.float32] | None  # (controls, len(STATE_LAYOUT))
    actor_started_at: float | None = None  # unix seconds the actor was started, if it was


def _controls_before(executed: dict[int, int], sequence: int) -> int:
    """The controls executed before observation `sequence` went out: the running total
    the last executed chunk before it reached (its `actions_executed` may be logged
    after that observation: it is written with the next record)."""
    return max((total for s, total in executed.items() if s < sequence), default=0)


def _seconds(record: dict[str, Any], key: str) -> float | None:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _note(paths: AttemptPaths, sequence: int) -> str | None:
    """The note of the response kept for `sequence`, as the actor wrote it; None if it
    wrote none or the response is not a JSON object."""
    try:
        with paths.response(sequence).open("rb") as fh:
            document = json.loads(fh.read(MAX_RESPONSE_BYTES))
    except (OSError, ValueError):
        return None
    note = document.get("note") if isinstance(document, dict) else None
    return note if isinstance(note, str) else None


def _feedback_text(feedback: object) -> str | None:
    if feedback is None:
        return None
    return json.dumps(feedback, sort_keys=True, ensure_ascii=False)


def _stop_was_deferred(feedback: object) -> bool:
    issues = feedback.get("issues") if isinstance(feedback, dict) else None
    return isinstance(issues, list) and any(
        isinstance(i, dict) and i.get("code") == "stop_deferred" for i in issues
    )


def _verdict(
    record: dict[str, Any], executed: int | None, next_feedback: object
) -> tuple[str, bool]:
    """The response's verdict in words, and whether it is a warning (refused, rejected)."""
    outcome = record.get("outcome")
    if record.get("event") == "response_rejected" or outcome == "protocol_error":
        return f"refused (protocol error): {record.get('reason', '')}", True
    if outcome == "invalid":
        reasons = record.get("reasons")
        listed = ", ".join(str(r) for r in reasons) if isinstance(reasons, list) else ""
        return f"rejected: {listed}", True
    if outcome == "accepted" and record.get("decision") == "stop":
        return ("stop, deferred" if _stop_was_deferred(next_feedback) else "stop"), False
    if outcome == "accepted":
        return f"accepted: {record.get('chunk_length')} vectors, {executed or 0} executed", False
    return f"unknown outcome {outcome!r}", True


def _actions(
    paths: AttemptPaths,
    result: EpisodeResult,
    prefixes: dict[int, list[list[float]]],
    dimension: int,
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32] | None]:
    """Every executed control's action (and state, with the proprio track), from
    steps.jsonl, or from the executed prefixes where a minimal record kept no steps."""
    proprio = result.settings.proprio
    expected = result.counters.executed_controls
    if paths.steps.exists():
        try:
            steps = read_steps(paths.steps, proprio=proprio, dimension=dimension)
        except StepsFileError as exc:
            raise EvidenceError(f"{paths.relative(paths.steps)}: {exc}") from exc
        actions, states = steps.action, steps.state
    else:
        rows = [row for s in sorted(prefixes) for row in prefixes[s]]
        actions = np.asarray(rows, dtype=np.float32).reshape(-1, dimension)
        states = None
    if len(actions) != expected and result.outcome != "error":
        raise EvidenceError(f"{len(actions)} actions for {expected} executed controls")
    return actions, states


def _vectors(value: object, dimension: int) -> list[list[float]]:
    if not isinstance(value, list):
        return []
    return [
        [float(x) for x in row]
        for row in value
        if isinstance(row, list)
        and len(row) == dimension
        and all(isinstance(x, int | float) and not isinstance(x, bool) for x in row)
    ]


def read_evidence(
    record: AttemptRecord, cameras: Sequence[str], keeps_images: bool, action: ActionSpec
) -> AttemptEvidence:
    """What a recording of the attempt shows, read from its evidence (its actions as
    `action` lays them out); raises EvidenceError when the evidence cannot be trusted."""
    result = record.result
    if result is None:
        raise EvidenceError("no result: the attempt is in progress or ended")
    if isinstance(result, CorruptResult):
        raise EvidenceError(f"corrupt result: {result.reason}")
    if result.attempt_id != record.attempt_id:
        raise EvidenceError(f"its result names attempt {result.attempt_id}")
    paths = AttemptPaths(record.directory)
    log = read_log(paths.events)
    if log.unreadable:
        first = log.unreadable[0]
        raise EvidenceError(f"{paths.relative(paths.events)} line {first.number} {first.why}")
    published: dict[int, dict[str, Any]] = {}
    responses: dict[int, dict[str, Any]] = {}
    executed: dict[int, int] = {}
    prefixes: dict[int, list[list[float]]] = {}
    served: dict[int, float | None] = {}
    started: float | None = None
    for event in log.records:
        kind, sequence = event.get("event"), event_sequence(event)
        if kind == "actor_started" and started is None:
            started = _seconds(event, "t")
        if sequence is None:
            continue
        if kind == "observation_published":
            published[sequence] = event
        elif kind in ("response_claimed", "response_rejected"):
            responses[sequence] = event
        elif kind == "actions_executed":
            total = event.get("executed_controls_total")
            if isinstance(total, int) and not isinstance(total, bool):
                executed[sequence] = total
            prefixes[sequence] = _vectors(event.get("executed_prefix"), action.dimension)
        elif kind == "decision_served":
            served[sequence] = _seconds(event, "latency_ms")
    observations: list[DeliveredObservation] = []
    for sequence in sorted(published):
        hashes = published[sequence].get("image_sha256")
        shown = {str(k): str(v) for k, v in hashes.items()} if isinstance(hashes, dict) else {}
        control = _controls_before(executed, sequence)
        at = _seconds(published[sequence], "t")
        observations.append(DeliveredObservation(sequence, control, shown, at))
    decisions: list[JudgedDecision] = []
    for sequence in sorted(responses):
        next_feedback = published.get(sequence + 1, {}).get("feedback")
        verdict, warning = _verdict(
            responses[sequence], len(prefixes.get(sequence, [])), next_feedback
        )
        decisions.append(
            JudgedDecision(
                sequence=sequence,
                control=_controls_before(executed, sequence),
                verdict=verdict,
                warning=warning,
                feedback=_feedback_text(next_feedback),
                note=_note(paths, sequence),
                claimed_at=_seconds(responses[sequence], "t"),
                latency_ms=served.get(sequence),
            )
        )
    actions, states = _actions(paths, result, prefixes, action.dimension)
    return AttemptEvidence(
        paths=paths,
        result=result,
        cameras=tuple(cameras),
        action_layout=action.layout,
        keeps_images=keeps_images,
        observations=observations,
        decisions=decisions,
        actions=actions,
        states=states,
        actor_started_at=started,
    )


def delivered_image(
    evidence: AttemptEvidence, observation: DeliveredObservation, camera: str
) -> bytes | None:
    """The PNG delivered for `camera` with `observation`, checked against the sha256
    its publication recorded; None where a minimal record kept no images."""
    path = evidence.paths.observation_image(observation.sequence, camera)
    name = evidence.paths.relative(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if evidence.keeps_images:
            raise EvidenceError(f"{name} is missing from a full record") from None
        return None
    except OSError as exc:
        raise EvidenceError(f"{name}: unreadable: {exc.strerror or exc}") from exc
    expected = observation.image_sha256.get(camera)
    if expected is None:
        raise EvidenceError(f"{name}: its observation recorded no sha256 for {camera}")
    if sha256_bytes(data) != expected:
        raise EvidenceError(f"{name} is not the image its observation delivered")
    return data


def selected_attempts(run: RunDirectory, attempt_ids: Sequence[str]) -> list[AttemptRecord]:
    records = run.attempts()
    if not attempt_ids:
        return records
    by_id = {r.attempt_id: r for r in records}
    unknown = [a for a in attempt_ids if a not in by_id]
    if unknown:
        known = ", ".join(sorted(by_id)) or "none"
        raise UnknownAttemptError(f"no attempt {unknown[0]!r} in {run.root}; its attempts: {known}")
    return [by_id[a] for a in dict.fromkeys(attempt_ids)]
