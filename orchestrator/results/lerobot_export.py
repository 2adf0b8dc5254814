"""`mailroom export --format lerobot`: a run as a LeRobot dataset (format v3.0, laid out
by `lerobot_dataset.py`), one episode per attempt whose record can be trusted, one frame
per executed control.

Frame k of an episode is control k, as LeRobot takes a frame: the observation its action
was chosen from, then the action.

    observation.images.<camera>   what the camera showed before control k: the PNG
                                  delivered to the actor where an observation went out
                                  before it (frame 0 always), else the episode video's
                                  frame of control k-1 (the camera after it); at the
                                  delivered resolution, H.264 (yuv420p), only for a run
                                  recorded `full` (a minimal record keeps no image)
    observation.state             the joint and finger positions before control k (the
                                  first observation's for frame 0, then where control k-1
                                  ended), when the run had the proprio track
    action                        the action executed, as the family lays it out
    next.success                  the native scorer's verdict after control k: true from
                                  the control it first held at (the episode ends there)
    next.done                     true on the episode's last frame
    timestamp, frame_index, episode_index, index, task_index   LeRobot's own

`fps` is the family's control rate; a task is the instruction as the first observation
delivered it. `meta/info.json` carries the run's identity under `mailroom` (its id,
profile, plan and manifest hashes, family, record, mailbox protocol, camera transform)
and never a path of this machine; each row of `meta/episodes` names the attempt it came
from (`mailroom/attempt_id`, its case, outcome and termination, and whether a later
attempt superseded it).

An attempt whose evidence cannot be trusted (`attempt_evidence.py`), that executed no
control, or whose video does not hold a frame for each control is skipped and listed.
The dataset is written into a temporary folder beside its destination and renamed onto
it whole; a destination that holds anything but a dataset this export wrote is refused.
"""

from __future__ import annotations

import contextlib
import io
import json
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import av
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq
from mailroom.orchestrator.episode.video import CameraEncoder
from mailroom.orchestrator.records.layout import AttemptPaths
from mailroom.orchestrator.records.run_directory import RunDirectory
from mailroom.orchestrator.results import lerobot_dataset as ds
from mailroom.orchestrator.results.attempt_evidence import (
    AttemptEvidence,
    EvidenceError,
    delivered_image,
    read_evidence,
)
from mailroom.orchestrator.results.export import (
    DEFAULT_EXPORT_DIR,
    ExportError,
    Skipped,
    load_run,
    publish_folder,
    run_identity,
)
from mailroom.orchestrator.results.steps_file import (
    STATE_LAYOUT,
    StepsFileError,
    start_state,
    states_before,
)
from mailroom.orchestrator.sim.specs import ActionSpec
from PIL import Image

LEROBOT_EXPORT_FORMAT = "mailroom.lerobot/v1"
DEFAULT_DATASET_DIR = "lerobot"
CODEC = "h264"  # the stream's name, as LeRobot records a video's codec


@dataclass(frozen=True)
class LeRobotExportSummary:
    out_dir: Path
    episodes: int
    frames: int
    tasks: int
    cameras: tuple[str, ...]  # those with images in the dataset (none: a minimal record)
    proprio: bool
    skipped: list[Skipped] = field(default_factory=list)

    def document(self) -> dict[str, Any]:
        return {
            "format": "lerobot",
            "codebase_version": ds.CODEBASE_VERSION,
            "out": str(self.out_dir),
            "episodes": self.episodes,
            "frames": self.frames,
            "tasks": self.tasks,
            "cameras": list(self.cameras),
            "proprio": self.proprio,
            "skipped": [{"file": s.file, "reason": s.reason} for s in self.skipped],
        }


@dataclass(frozen=True)
class _Episode:
    """One attempt's frames, read and checked whole before anything of it is written."""

    attempt_id: str
    case_id: str
    outcome: str
    termination: str | None
    superseded: bool
    task: str
    actions: npt.NDArray[np.float32]
    states: npt.NDArray[np.float32] | None
    success: npt.NDArray[np.bool_]
    images: dict[str, npt.NDArray[np.uint8]]  # camera -> (frames, height, width, 3)

    def __len__(self) -> int:
        return len(self.actions)


# reading an attempt --------------------------------------------------------------------


def _first_instruction(paths: AttemptPaths) -> str:
    try:
        document = json.loads(paths.observation(1).read_bytes())
    except (OSError, ValueError) as exc:
        raise EvidenceError(f"its first observation cannot be read: {exc}") from exc
    instruction = document.get("instruction") if isinstance(document, dict) else None
    if not isinstance(instruction, str) or not instruction:
        raise EvidenceError("its first observation delivered no instruction")
    return instruction


def _png(data: bytes, name: str) -> npt.NDArray[np.uint8]:
    try:
        with Image.open(io.BytesIO(data)) as image:
            return np.asarray(image.convert("RGB"), dtype=np.uint8)
    except (OSError, ValueError) as exc:
        raise EvidenceError(f"{name} cannot be decoded: {exc}") from exc


def _video_frames(path: Path, name: str) -> list[npt.NDArray[np.uint8]]:
    try:
        with av.open(str(path)) as container:
            return [
                np.asarray(f.to_ndarray(format="rgb24"), dtype=np.uint8)
                for f in container.decode(video=0)
            ]
    except FileNotFoundError:
        raise EvidenceError(f"{name} is missing from a full record") from None
    except (OSError, av.error.FFmpegError) as exc:
        raise EvidenceError(f"{name} cannot be decoded: {exc}") from exc


def _camera_frames(evidence: AttemptEvidence, camera: str) -> npt.NDArray[np.uint8]:
    """What `camera` showed before each control (see the module's docstring)."""
    paths = evidence.paths
    controls = len(evidence.actions)
    video = _video_frames(paths.video(camera), paths.relative(paths.video(camera)))
    if len(video) != controls:
        name = paths.relative(paths.video(camera))
        raise EvidenceError(f"{name} holds {len(video)} frames for {controls} controls")
    delivered: dict[int, npt.NDArray[np.uint8]] = {}
    for observation in evidence.observations:
        if observation.control < controls and observation.control not in delivered:
            data = delivered_image(evidence, observation, camera)
            if data is None:
                name = paths.relative(paths.observation_image(observation.sequence, camera))
                raise EvidenceError(f"{name} is missing from a full record")
            name = paths.relative(paths.observation_image(observation.sequence, camera))
            delivered[observation.control] = _png(data, name)
    if 0 not in delivered:
        raise EvidenceError("no observation was delivered before the first control")
    frames = [delivered.get(k, video[k - 1] if k else video[0]) for k in range(controls)]
    shapes = {f.shape for f in frames}
    if len(shapes) != 1:
        raise EvidenceError(f"{camera}: its images and video frames differ in size: {shapes}")
    return np.stack(frames)


def _episode(
    evidence: AttemptEvidence,
    *,
    superseded: bool,
    cameras: tuple[str, ...],
    proprio: bool,
) -> _Episode:
    result = evidence.result
    controls = len(evidence.actions)
    if controls == 0:
        raise EvidenceError("it executed no control: a LeRobot episode has at least one frame")
    states = None
    if proprio:
        if evidence.states is None:
            raise EvidenceError("the run had the proprio track, but its steps hold no state")
        try:
            states = states_before(start_state(evidence.paths.observation(1)), evidence.states)
        except StepsFileError as exc:
            raise EvidenceError(str(exc)) from exc
    first = result.counters.first_success_control
    success = np.arange(1, controls + 1) >= (first if first is not None else controls + 1)
    return _Episode(
        attempt_id=result.attempt_id,
        case_id=result.case_id,
        outcome=result.outcome,
        termination=result.termination,
        superseded=superseded,
        task=_first_instruction(evidence.paths),
        actions=evidence.actions.astype(np.float32),
        states=states,
        success=success.astype(np.bool_),
        images={camera: _camera_frames(evidence, camera) for camera in cameras},
    )


# writing the dataset -------------------------------------------------------------------


class _VideoFile:
    """One camera's frames, episode after episode, in one MP4 (the episode videos'
    encoder: H.264, yuv420p, frame n at n / fps)."""

    def __init__(self, path: Path, width: int, height: int, fps: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fps = fps
        self._encoder = CameraEncoder(path, width, height, fps)

    def add(self, frames: npt.NDArray[np.uint8]) -> tuple[float, float]:
        """Append an episode's frames; its from and to timestamps in this file."""
        start = self._encoder.frames
        for image in frames:
            self._encoder.encode(np.ascontiguousarray(image))
        return start / self.fps, self._encoder.frames / self.fps

    def size_mb(self) -> float:
        """What the file holds so far (nothing before its first frames are written out)."""
        try:
            return self._encoder.temporary.stat().st_size / 2**20
        except FileNotFoundError:
            return 0.0

    def close(self) -> None:
        self._encoder.close()
        self._encoder.temporary.rename(self._encoder.final)


class _Videos:
    """Each camera's video files, a new one once the current reaches its size."""

    def __init__(self, root: Path, fps: int) -> None:
        self.root = root
        self.fps = fps
        self.files: dict[str, tuple[int, _VideoFile]] = {}

    def add(self, camera: str, frames: npt.NDArray[np.uint8]) -> dict[str, Any]:
        key = ds.image_key(camera)
        number, current = self.files.get(camera, (-1, None))
        if current is None or current.size_mb() >= ds.VIDEO_FILE_SIZE_MB:
            if current is not None:
                current.close()
            number += 1
            where = ds.VIDEO_PATH.format(video_key=key, **ds.file_location(number))
            height, width = frames.shape[1:3]
            current = _VideoFile(self.root / where, width, height, self.fps)
            self.files[camera] = (number, current)
        start, end = current.add(frames)
        location = ds.file_location(number)
        return {
            f"videos/{key}/chunk_index": location["chunk_index"],
            f"videos/{key}/file_index": location["file_index"],
            f"videos/{key}/from_timestamp": start,
            f"videos/{key}/to_timestamp": end,
        }

    def close(self) -> None:
        while self.files:
            _, video = self.files.pop(next(iter(self.files)))
            video.close()


class _DataFiles:
    """The frames' rows, a new file once the current reaches its size."""

    def __init__(self, root: Path, schema: pa.Schema) -> None:
        self.root = root
        self.schema = schema
        self.number = -1
        self.written = 0
        self._writer: pq.ParquetWriter | None = None

    def add(self, table: pa.Table) -> dict[str, int]:
        if self._writer is None or self.written >= ds.DATA_FILE_SIZE_MB * 2**20:
            self.close()
            self.number += 1
            path = self.root / ds.DATA_PATH.format(**ds.file_location(self.number))
            path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = pq.ParquetWriter(path, self.schema, compression="snappy")
            self.written = 0
        self._writer.write_table(table)
        self.written += table.nbytes
        location = ds.file_location(self.number)
        return {
            "data/chunk_index": location["chunk_index"],
            "data/file_index": location["file_index"],
        }

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _fixed(matrix: npt.NDArray[np.float32]) -> pa.Array:
    return pa.FixedSizeListArray.from_arrays(
        pa.array(matrix.reshape(-1), pa.float32()), matrix.shape[1]
    )


def _frames_schema(dimension: int, proprio: bool) -> pa.Schema:
    fields = [pa.field("action", pa.list_(pa.float32(), dimension))]
    if proprio:
        fields.append(pa.field("observation.state", pa.list_(pa.float32(), len(STATE_LAYOUT))))
    fields += [
        pa.field("next.done", pa.bool_()),
        pa.field("next.success", pa.bool_()),
        *(
            pa.field(name, pa.from_numpy_dtype(np.dtype(t)))
            for name, t in ds.INDEX_FEATURES.items()
        ),
    ]
    return pa.schema(fields)


def _frames_table(
    episode: _Episode, schema: pa.Schema, *, episode_index: int, first: int, task: int, fps: int
) -> tuple[pa.Table, dict[str, npt.NDArray[Any]]]:
    """The episode's rows, and each numeric feature's values (for its statistics)."""
    n = len(episode)
    frame_index = np.arange(n, dtype=np.int64)
    done = np.zeros(n, dtype=np.bool_)
    done[-1] = True
    values: dict[str, npt.NDArray[Any]] = {
        "action": episode.actions,
        "next.done": done,
        "next.success": episode.success,
        "timestamp": (frame_index / fps).astype(np.float32),
        "frame_index": frame_index,
        "episode_index": np.full(n, episode_index, dtype=np.int64),
        "index": np.arange(first, first + n, dtype=np.int64),
        "task_index": np.full(n, task, dtype=np.int64),
    }
    if episode.states is not None:
        values["observation.state"] = episode.states
    columns = {
        name: _fixed(values[name]) if values[name].ndim == 2 else pa.array(values[name])
        for name in schema.names
    }
    return pa.Table.from_pydict(columns, schema=schema), values


def _identity(run: RunDirectory, manifest: dict[str, Any]) -> dict[str, Any]:
    identity = run_identity(run, manifest)
    return {"format": LEROBOT_EXPORT_FORMAT, **identity, "observation": "before_action"}


def _ours(out: Path) -> bool:
    """Whether `out` holds a dataset this export wrote."""
    try:
        info = json.loads((out / ds.INFO_PATH).read_text("utf-8"))
        return bool(info.get("mailroom", {}).get("format") == LEROBOT_EXPORT_FORMAT)
    except (OSError, ValueError, AttributeError):
        return False


class _DatasetWriter:
    """The dataset under construction in `root`: episodes added one at a time (each
    already read and checked whole), then its metadata."""

    def __init__(self, root: Path, *, action: ActionSpec, proprio: bool) -> None:
        self.root = root
        self.action = action
        self.proprio = proprio
        self.schema = _frames_schema(action.dimension, proprio)
        self.data = _DataFiles(root, self.schema)
        self.videos = _Videos(root, action.control_hz)
        self.tasks: dict[str, int] = {}
        self.rows: list[dict[str, Any]] = []
        self.stats: list[dict[str, ds.Stats]] = []
        self.shapes: dict[str, tuple[int, int]] = {}  # camera -> (height, width)
        self.frames = 0

    def refusal(self, episode: _Episode) -> str | None:
        """Why the episode cannot join the dataset (its images of another size)."""
        for camera, images in episode.images.items():
            shape = (int(images.shape[1]), int(images.shape[2]))
            if self.shapes.get(camera, shape) != shape:
                return f"{camera} images are {shape}, not {self.shapes[camera]}"
        return None

    def add(self, episode: _Episode) -> None:
        index = len(self.rows)
        task = self.tasks.setdefault(episode.task, len(self.tasks))
        table, values = _frames_table(
            episode,
            self.schema,
            episode_index=index,
            first=self.frames,
            task=task,
            fps=self.action.control_hz,
        )
        stats = {name: ds.feature_stats(v) for name, v in values.items()}
        row: dict[str, Any] = {
            "episode_index": index,
            "tasks": [episode.task],
            "length": len(episode),
            **self.data.add(table),
            "dataset_from_index": self.frames,
            "dataset_to_index": self.frames + len(episode),
        }
        for camera, images in episode.images.items():
            self.shapes.setdefault(camera, (int(images.shape[1]), int(images.shape[2])))
            row.update(self.videos.add(camera, images))
            stats[ds.image_key(camera)] = ds.image_stats(images)
        row.update(
            {
                "meta/episodes/chunk_index": 0,
                "meta/episodes/file_index": 0,
                **ds.flat_stats_columns(stats),
                "mailroom/attempt_id": episode.attempt_id,
                "mailroom/case_id": episode.case_id,
                "mailroom/outcome": episode.outcome,
                "mailroom/termination": episode.termination,
                "mailroom/superseded": episode.superseded,
            }
        )
        self.rows.append(row)
        self.stats.append(stats)
        self.frames += len(episode)

    def features(self) -> dict[str, Any]:
        fps = self.action.control_hz
        features: dict[str, Any] = {
            ds.image_key(camera): ds.video_feature(height, width, fps, CODEC)
            for camera, (height, width) in self.shapes.items()
        }
        if self.proprio:
            features["observation.state"] = ds.vector_feature(STATE_LAYOUT)
        features["action"] = ds.vector_feature(self.action.layout)
        features["next.done"] = ds.scalar_feature("bool")
        features["next.success"] = ds.scalar_feature("bool")
        for name, dtype in ds.INDEX_FEATURES.items():
            features[name] = ds.scalar_feature(dtype)
        return features

    def finish(self, identity: dict[str, Any]) -> None:
        """Close the data and video files; write the metadata."""
        self.close()
        meta = self.root / "meta"
        meta.mkdir(parents=True, exist_ok=True)
        info = ds.info_document(
            fps=self.action.control_hz,
            features=self.features(),
            episodes=len(self.rows),
            frames=self.frames,
            tasks=len(self.tasks),
            has_video=bool(self.shapes),
            extra={"mailroom": identity},
        )
        (self.root / ds.INFO_PATH).write_text(json.dumps(info, indent=2) + "\n")
        stats = {
            name: ds.aggregate_stats([s[name] for s in self.stats])
            for name in (self.stats[0] if self.stats else {})
        }
        (self.root / ds.STATS_PATH).write_text(json.dumps(ds.stats_document(stats), indent=2))
        pq.write_table(ds.tasks_table(list(self.tasks)), self.root / ds.TASKS_PATH)
        if self.rows:
            episodes = self.root / ds.EPISODES_PATH.format(**ds.file_location(0))
            episodes.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pylist(self.rows), episodes, compression="snappy")

    def close(self) -> None:
        self.data.close()
        self.videos.close()


def export_lerobot(run_dir: Path, out_dir: Path | None = None) -> LeRobotExportSummary:
    """Write `run_dir` as a LeRobot v3.0 dataset into `out_dir` (default
    `run_dir/export/lerobot`); raises ExportError when the run cannot be read at all or
    `out_dir` holds something else."""
    run = RunDirectory(run_dir)
    loaded = load_run(run)
    manifest = loaded.manifest
    proprio = bool(manifest["settings"]["proprio"])
    keeps_images = manifest.get("record") == "full"
    run_cameras = tuple(str(c) for c in manifest["protocol"]["cameras"])
    out = (
        out_dir if out_dir is not None else run_dir / DEFAULT_EXPORT_DIR / DEFAULT_DATASET_DIR
    ).absolute()
    if not out.name:
        raise ExportError(f"{out} is no folder to write a dataset into: name another --out")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot write beside {out}: {exc.strerror or exc}") from exc
    skipped: list[Skipped] = []
    ordered = []
    for record in run.attempts():
        if record.case_id in loaded.order:
            ordered.append((loaded.order[record.case_id], record.attempt, record))
        else:
            skipped.append(Skipped(f"episodes/{record.attempt_id}", "its case is not in the plan"))
    ordered.sort(key=lambda item: (item[0], item[1]))
    last = {record.case_id: record.attempt for _, _, record in ordered}

    temporary = out.with_name(f".{out.name}.{secrets.token_hex(4)}.tmp")
    try:
        temporary.mkdir()
    except OSError as exc:
        raise ExportError(f"cannot write beside {out}: {exc.strerror or exc}") from exc
    writer = _DatasetWriter(temporary, action=loaded.action, proprio=proprio)
    try:
        for _, _, record in ordered:
            where = f"episodes/{record.attempt_id}"
            try:
                evidence = read_evidence(record, run_cameras, keeps_images, loaded.action)
                episode = _episode(
                    evidence,
                    superseded=record.attempt != last[record.case_id],
                    cameras=run_cameras if keeps_images else (),
                    proprio=proprio,
                )
            except EvidenceError as exc:
                skipped.append(Skipped(where, str(exc)))
                continue
            refusal = writer.refusal(episode)
            if refusal is not None:
                skipped.append(Skipped(where, refusal))
                continue
            writer.add(episode)
        writer.finish(_identity(run, manifest))
    except (OSError, av.error.FFmpegError) as exc:
        with contextlib.suppress(Exception):
            writer.close()
        shutil.rmtree(temporary, ignore_errors=True)
        raise ExportError(f"cannot write the dataset beside {out}: {exc}") from exc
    except BaseException:
        with contextlib.suppress(Exception):
            writer.close()
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    publish_folder(temporary, out, _ours, "dataset")
    return LeRobotExportSummary(
        out_dir=out,
        episodes=len(writer.rows),
        frames=writer.frames,
        tasks=len(writer.tasks),
        cameras=tuple(writer.shapes),
        proprio=proprio,
        skipped=skipped,
    )
