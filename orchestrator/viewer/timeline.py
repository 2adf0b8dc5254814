"""What an attempt showed and did, decision by decision, read from its evidence.

Everything here is read from the private run directory and is treated as untrusted
text: an actor wrote the responses and its captured output, and a damaged run may hold
torn or foreign lines. Reading never raises on bad content: what cannot be read is
left out and said so (`problems`), and every text is bounded before it is shown.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mailroom.orchestrator.records.event_log import event_sequence, read_log
from mailroom.orchestrator.records.layout import RESULT_FILE, AttemptPaths
from mailroom.orchestrator.records.result import EpisodeResult
from mailroom.orchestrator.records.run_directory import AttemptRecord, CorruptResult
from mailroom.orchestrator.viewer.run_shape import RunShape

# The most of an actor's text (a response, its output) a page shows.
MAX_SHOWN_BYTES = 256 * 1024


@dataclass(frozen=True)
class ShownText:
    """Bytes as text for a page: decoded (invalid UTF-8 replaced), at most
    `MAX_SHOWN_BYTES` of them, and how many there were."""

    text: str
    size: int
    truncated: bool

    @classmethod
    def of(cls, data: bytes) -> ShownText:
        kept = data[:MAX_SHOWN_BYTES]
        return cls(kept.decode("utf-8", errors="replace"), len(data), len(data) > len(kept))


@dataclass
class Decision:
    """One policy call: what the actor saw, what it answered, what came of it."""

    sequence: int
    images: dict[str, str] = field(default_factory=dict)  # camera -> file under the attempt
    image_sha256: dict[str, str] = field(default_factory=dict)
    feedback_shown: Any = None  # the feedback this observation carried
    counters_shown: dict[str, Any] = field(default_factory=dict)  # as the observation said
    response: ShownText | None = None
    response_sha256: str | None = None
    verdict: str = "no response"
    reasons: list[str] = field(default_factory=list)
    executed_prefix: list[list[float]] = field(default_factory=list)
    executed_controls_total: int | None = None
    native_success: bool = False
    latency_ms: float | None = None
    queue_delay_ms: float | None = None
    processing_ms: float | None = None
    feedback_after: Any = None  # what the next observation told the actor


@dataclass
class AttemptTimeline:
    attempt_id: str
    directory: Path
    shape: RunShape
    result: EpisodeResult | CorruptResult | None
    decisions: list[Decision]
    actions: list[list[float]]  # every executed control's action, in order
    videos: dict[str, str]  # camera -> file under the attempt
    outputs: dict[str, ShownText]
    events: list[dict[str, Any]]
    problems: list[str]

    @property
    def first_success_control(self) -> int | None:
        if isinstance(self.result, EpisodeResult):
            return self.result.counters.first_success_control
        return None


def _read_jsonl(path: Path, problems: list[str]) -> list[dict[str, Any]]:
    log = read_log(path)
    problems.extend(f"{path.name} line {u.number} {u.why}: left out" for u in log.unreadable)
    return log.records


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _vectors(value: Any) -> list[list[float]]:
    if not isinstance(value, list):
        return []
    out: list[list[float]] = []
    for row in value:
        if isinstance(row, list) and all(_number(x) is not None for x in row):
            out.append([float(x) for x in row])
    return out


def _verdict(record: dict[str, Any]) -> tuple[str, list[str]]:
    outcome = record.get("outcome")
    if record.get("event") == "response_rejected":
        return "refused (protocol error)", [str(record.get("reason", ""))]
    if outcome == "invalid":
        reasons = record.get("reasons")
        return "rejected", [str(r) for r in reasons] if isinstance(reasons, list) else []
    if outcome == "protocol_error":
        return "refused (protocol error)", [str(record.get("reason", ""))]
    if outcome == "accepted":
        return ("stop" if record.get("decision") == "stop" else "accepted"), []
    return "unknown", []


def _observation_counters(path: Path) -> dict[str, Any]:
    """The counters an observation document showed the actor (kept in every record
    mode); {} if it was not kept or is not what it should be."""
    try:
        document = json.loads(path.read_bytes()[:MAX_SHOWN_BYTES])
    except (OSError, ValueError):
        return {}
    counters = document.get("counters") if isinstance(document, dict) else None
    if not isinstance(counters, dict):
        return {}
    return {str(k): v for k, v in counters.items() if isinstance(v, int | float | None)}


def _feedback_codes(feedback: Any) -> list[str]:
    issues = feedback.get("issues") if isinstance(feedback, dict) else None
    if not isinstance(issues, list):
        return []
    return [str(i.get("code")) for i in issues if isinstance(i, dict)]


def read_timeline(record: AttemptRecord, shape: RunShape) -> AttemptTimeline:
    """The attempt's timeline, its images and actions as its run's `shape` says; its
    result is the one the run directory read already."""
    directory = record.directory
    paths = AttemptPaths(directory)
    problems: list[str] = []
    events = _read_jsonl(paths.events, problems)
    by_sequence: dict[int, Decision] = {}

    def decision(sequence: int) -> Decision:
        return by_sequence.setdefault(sequence, Decision(sequence))

    for event in events:
        kind, sequence = event.get("event"), event_sequence(event)
        if sequence is None:
            continue
        if kind == "observation_published":
            shown = decision(sequence)
            hashes = event.get("image_sha256")
            if isinstance(hashes, dict):
                shown.image_sha256 = {str(k): str(v) for k, v in hashes.items()}
            shown.feedback_shown = event.get("feedback")
            shown.counters_shown = _observation_counters(paths.observation(sequence))
            for camera in shape.cameras:
                image = paths.observation_image(sequence, camera)
                if image.is_file():
                    shown.images[camera] = paths.relative(image)
        elif kind in ("response_claimed", "response_rejected"):
            answered = decision(sequence)
            answered.verdict, answered.reasons = _verdict(event)
            sha = event.get("sha256")
            answered.response_sha256 = sha if isinstance(sha, str) else None
            raw = paths.response(sequence)
            if raw.is_file():
                answered.response = ShownText.of(raw.read_bytes())
        elif kind == "actions_executed":
            done = decision(sequence)
            done.executed_prefix = _vectors(event.get("executed_prefix"))
            total = event.get("executed_controls_total")
            done.executed_controls_total = total if isinstance(total, int) else None
            done.native_success = event.get("native_success") is True
        elif kind == "decision_served":
            served = decision(sequence)
            served.latency_ms = _number(event.get("latency_ms"))
            served.queue_delay_ms = _number(event.get("queue_delay_ms"))
            served.processing_ms = _number(event.get("processing_ms"))
    decisions = [by_sequence[s] for s in sorted(by_sequence)]
    for current, following in itertools.pairwise(decisions):
        current.feedback_after = following.feedback_shown
        if current.verdict == "stop" and "stop_deferred" in _feedback_codes(
            following.feedback_shown
        ):
            current.verdict = "deferred stop"
    result = record.result
    if isinstance(result, CorruptResult):
        problems.append(f"{RESULT_FILE} cannot be trusted: {result.reason}")
    steps = _read_jsonl(paths.steps, problems)
    actions = [a for s in steps for a in _vectors([s.get("action")])]
    if not actions:  # minimal records keep no steps: the executed prefixes say the same
        actions = [a for d in decisions for a in d.executed_prefix]
    videos = {
        camera: paths.relative(paths.video(camera))
        for camera in shape.cameras
        if paths.video(camera).is_file()
    }
    outputs = {
        path.name: ShownText.of(path.read_bytes())
        for path in paths.actor_output.values()
        if path.is_file()
    }
    return AttemptTimeline(
        attempt_id=record.attempt_id,
        directory=directory,
        shape=shape,
        result=result,
        decisions=decisions,
        actions=actions,
        videos=videos,
        outputs=outputs,
        events=events,
        problems=problems,
    )
