"""Export a run's attempts as Rerun recordings: one `<attempt id>.rrd` per attempt.

A recording has one timeline, `control`: how many controls the episode had executed.

    cameras/<camera>      each observation's image, the PNG bytes delivered to the actor
                          (full records keep them), at the control it was delivered at
    action/<component>    each executed control's action, one series per component of
                          the action layout (`action/gripper` is the gripper command), at
                          the control it was executed from (its frame_index)
    proprio/<name>        the proprioception each control ended in (a run with the
                          proprio track on), at the control count it ended in
    decisions             one entry per response judged or refused: its verdict (a
                          rejection's reasons), at the control its observation was
                          delivered at
    decisions/feedback    what the next observation told the actor about it, as JSON
    decisions/note        the note the actor wrote in its response, as it wrote it
    native_success        one entry at the control the native scorer first saw success
    episode               how the episode ended, at its last control

Everything an actor wrote is untrusted: it is stored as plain text (a TextLog) and never
interpreted; its response is read as JSON only to find its note.

An attempt whose evidence cannot be trusted is skipped and listed: no result document
(in progress, corrupt, naming another attempt), an event log with unreadable lines,
steps the runner could not have written or as many as the result does not count, an
image whose bytes are not the ones its observation recorded as delivered (their sha256),
or an image missing from a full record. Each file is written under a temporary name and
renamed whole. Rerun is imported only here, when a recording is written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from mailroom.hashing import sha256_bytes
from mailroom.orchestrator.records.event_log import read_log
from mailroom.orchestrator.records.layout import AttemptPaths
from mailroom.orchestrator.records.result import EpisodeResult
from mailroom.orchestrator.records.run_directory import (
    AttemptRecord,
    CorruptResult,
    RunDirectory,
)
from mailroom.orchestrator.results.export import (
    DEFAULT_EXPORT_DIR,
    STATE_LAYOUT,
    ExportError,
    Skipped,
    StepsFileError,
    load_run,
    published_file,
    read_steps,
)
from mailroom.orchestrator.sim.specs import ActionSpec

if TYPE_CHECKING:
    import rerun as rr

APPLICATION_ID = "mailroom"
TIMELINE = "control"
RECORDING_SUFFIX = ".rrd"
# The most of a response read to find its note (the mailbox bounds responses below this).
MAX_RESPONSE_BYTES = 4 * 1024 * 1024


class UnknownAttemptError(ExportError):
    """`--attempt` names no attempt of the run."""


class EvidenceError(ValueError):
    """An attempt's evidence cannot be trusted; the attempt is skipped and listed."""


@dataclass(frozen=True)
class AttemptRecording:
    """One recording written: what it holds, counted as written."""

    attempt_id: str
    file: Path
    observations: int
    images: dict[str, int]  # camera -> images written
    controls: int
    decisions: int
    proprio: bool
    native_success_control: int | None

    def document(self) -> dict[str, Any]:
        return {
            "attempt_id": self.attempt_id,
            "file": str(self.file),
            "observations": self.observations,
            "images": dict(self.images),
            "controls": self.controls,
            "decisions": self.decisions,
            "proprio": self.proprio,
            "native_success_control": self.native_success_control,
        }


@dataclass(frozen=True)
class RerunExportSummary:
    out_dir: Path
    recordings: list[AttemptRecording]
    skipped: list[Skipped] = field(default_factory=list)

    def document(self) -> dict[str, Any]:
        return {
            "format": "rerun",
            "out": str(self.out_dir),
            "recordings": [r.document() for r in self.recordings],
            "skipped": [{"file": s.file, "reason": s.reason} for s in self.skipped],
        }


# reading an attempt's evidence ---------------------------------------------------------


@dataclass(frozen=True)
class _Observation:
    sequence: int
    control: int
    image_sha256: dict[str, str]  # camera -> the sha256 recorded at publication


@dataclass(frozen=True)
class _Decision:
    sequence: int
    control: int
    verdict: str
    warning: bool
    feedback: str | None  # JSON text
    note: str | None


@dataclass(frozen=True)
class _Evidence:
    paths: AttemptPaths
    result: EpisodeResult
    cameras: tuple[str, ...]
    action_layout: tuple[str, ...]
    keeps_images: bool
    observations: list[_Observation]
    decisions: list[_Decision]
    actions: npt.NDArray[np.float32]  # (controls, len(action_layout))
    states: npt.NDArray[np.float32] | None  # (controls, len(STATE_LAYOUT))


def _sequence(record: dict[str, Any]) -> int | None:
    value = record.get("sequence")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def _controls_before(executed: dict[int, int], sequence: int) -> int:
    """The controls executed before observation `sequence` went out: the running total
    the last executed chunk before it reached (its `actions_executed` may be logged
    after that observation: it is written with the next record)."""
    return max((total for s, total in executed.items() if s < sequence), default=0)


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
) -> _Evidence:
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
    for event in log.records:
        kind, sequence = event.get("event"), _sequence(event)
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
    observations: list[_Observation] = []
    for sequence in sorted(published):
        hashes = published[sequence].get("image_sha256")
        shown = {str(k): str(v) for k, v in hashes.items()} if isinstance(hashes, dict) else {}
        control = _controls_before(executed, sequence)
        observations.append(_Observation(sequence, control, shown))
    decisions: list[_Decision] = []
    for sequence in sorted(responses):
        next_feedback = published.get(sequence + 1, {}).get("feedback")
        verdict, warning = _verdict(
            responses[sequence], len(prefixes.get(sequence, [])), next_feedback
        )
        decisions.append(
            _Decision(
                sequence=sequence,
                control=_controls_before(executed, sequence),
                verdict=verdict,
                warning=warning,
                feedback=_feedback_text(next_feedback),
                note=_note(paths, sequence),
            )
        )
    actions, states = _actions(paths, result, prefixes, action.dimension)
    return _Evidence(
        paths=paths,
        result=result,
        cameras=tuple(cameras),
        action_layout=action.layout,
        keeps_images=keeps_images,
        observations=observations,
        decisions=decisions,
        actions=actions,
        states=states,
    )


def _image(evidence: _Evidence, observation: _Observation, camera: str) -> bytes | None:
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


# writing a recording -------------------------------------------------------------------


def _log_series(
    recording: rr.RecordingStream,
    prefix: str,
    names: Sequence[str],
    controls: npt.NDArray[np.int64],
    values: npt.NDArray[np.float32],
) -> None:
    import rerun as rr

    if len(controls) == 0:
        return
    for column, name in enumerate(names):
        recording.send_columns(
            f"{prefix}/{name}",
            indexes=[rr.TimeColumn(TIMELINE, sequence=controls)],
            columns=rr.Scalars.columns(scalars=values[:, column].astype(np.float64)),
        )


def _write(evidence: _Evidence, path: Path) -> AttemptRecording:
    import rerun as rr

    result = evidence.result
    recording = rr.RecordingStream(APPLICATION_ID, recording_id=result.attempt_id)
    recording.set_log_tick_enabled(False)
    recording.set_log_time_enabled(False)
    recording.save(path)
    try:
        recording.send_recording_name(result.attempt_id)
        images = dict.fromkeys(evidence.cameras, 0)
        for observation in evidence.observations:
            recording.set_time(TIMELINE, sequence=observation.control)
            for camera in evidence.cameras:
                data = _image(evidence, observation, camera)
                if data is None:
                    continue
                recording.log(
                    f"cameras/{camera}", rr.EncodedImage(contents=data, media_type="image/png")
                )
                images[camera] += 1
        controls = np.arange(len(evidence.actions), dtype=np.int64)
        _log_series(recording, "action", evidence.action_layout, controls, evidence.actions)
        if evidence.states is not None:
            _log_series(recording, "proprio", STATE_LAYOUT, controls + 1, evidence.states)
        for decision in evidence.decisions:
            recording.set_time(TIMELINE, sequence=decision.control)
            level = rr.TextLogLevel.WARN if decision.warning else rr.TextLogLevel.INFO
            text = f"policy call {decision.sequence}: {decision.verdict}"
            recording.log("decisions", rr.TextLog(text, level=level))
            if decision.feedback is not None:
                recording.log("decisions/feedback", rr.TextLog(decision.feedback))
            if decision.note is not None:
                recording.log("decisions/note", rr.TextLog(decision.note))
        success = result.counters.first_success_control
        if success is not None:
            recording.set_time(TIMELINE, sequence=success)
            recording.log("native_success", rr.TextLog(f"native success at control {success}"))
        recording.set_time(TIMELINE, sequence=result.counters.executed_controls)
        ending = f"{result.outcome}, termination {result.termination}"
        if result.truncation is not None:
            ending += f", truncated: {result.truncation}"
        if result.errors:
            ending += ", errors: " + ", ".join(e.code for e in result.errors)
        recording.log("episode", rr.TextLog(ending))
        recording.flush()
    finally:
        recording.disconnect()
    return AttemptRecording(
        attempt_id=result.attempt_id,
        file=path,
        observations=len(evidence.observations),
        images=images,
        controls=len(evidence.actions),
        decisions=len(evidence.decisions),
        proprio=evidence.states is not None,
        native_success_control=success,
    )


# the run -------------------------------------------------------------------------------


def _selected(run: RunDirectory, attempt_ids: Sequence[str]) -> list[AttemptRecord]:
    records = run.attempts()
    if not attempt_ids:
        return records
    by_id = {r.attempt_id: r for r in records}
    unknown = [a for a in attempt_ids if a not in by_id]
    if unknown:
        known = ", ".join(sorted(by_id)) or "none"
        raise UnknownAttemptError(f"no attempt {unknown[0]!r} in {run.root}; its attempts: {known}")
    return [by_id[a] for a in dict.fromkeys(attempt_ids)]


def export_rerun(
    run_dir: Path, out_dir: Path | None = None, attempt_ids: Sequence[str] = ()
) -> RerunExportSummary:
    """Write one recording per attempt of `run_dir` (or of each of `attempt_ids`) into
    `out_dir` (default `run_dir/export`); raises ExportError when the run cannot be read
    at all, UnknownAttemptError when an attempt id names none of its attempts."""
    run = RunDirectory(run_dir)
    loaded = load_run(run)
    manifest = loaded.manifest
    records = _selected(run, attempt_ids)
    cameras = tuple(str(c) for c in manifest["protocol"]["cameras"])
    keeps_images = manifest.get("record") == "full"
    out = out_dir if out_dir is not None else run_dir / DEFAULT_EXPORT_DIR
    out.mkdir(parents=True, exist_ok=True)
    recordings: list[AttemptRecording] = []
    skipped: list[Skipped] = []
    for record in records:
        where = AttemptPaths(record.directory)
        path = out / f"{record.attempt_id}{RECORDING_SUFFIX}"
        try:
            evidence = read_evidence(record, cameras, keeps_images, loaded.action)
            with published_file(path) as temporary:
                written = _write(evidence, temporary)
        except EvidenceError as exc:
            skipped.append(Skipped(where.root.relative_to(run.root).as_posix(), str(exc)))
            continue
        recordings.append(replace(written, file=path))  # named as published
    return RerunExportSummary(out_dir=out, recordings=recordings, skipped=skipped)
