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

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from mailroom.orchestrator.records.layout import AttemptPaths
from mailroom.orchestrator.records.run_directory import RunDirectory
from mailroom.orchestrator.results.attempt_evidence import (
    AttemptEvidence,
    EvidenceError,
    delivered_image,
    read_evidence,
    selected_attempts,
)
from mailroom.orchestrator.results.export import (
    DEFAULT_EXPORT_DIR,
    Skipped,
    load_run,
    published_file,
)
from mailroom.orchestrator.results.steps_file import STATE_LAYOUT

if TYPE_CHECKING:
    import rerun as rr

APPLICATION_ID = "mailroom"
TIMELINE = "control"
RECORDING_SUFFIX = ".rrd"


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


def _write(evidence: AttemptEvidence, path: Path) -> AttemptRecording:
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
                data = delivered_image(evidence, observation, camera)
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


def export_rerun(
    run_dir: Path, out_dir: Path | None = None, attempt_ids: Sequence[str] = ()
) -> RerunExportSummary:
    """Write one recording per attempt of `run_dir` (or of each of `attempt_ids`) into
    `out_dir` (default `run_dir/export`); raises ExportError when the run cannot be read
    at all, UnknownAttemptError when an attempt id names none of its attempts."""
    run = RunDirectory(run_dir)
    loaded = load_run(run)
    manifest = loaded.manifest
    records = selected_attempts(run, attempt_ids)
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
