"""A LeRobot dataset (format v3.0) read back as LeRobot's own loader reads it, with
pyarrow and av, checking every rule of the format's published structure on the way; and
one episode of any reader (this one, or LeRobot's own `LeRobotDataset` through
`lerobot_client.py`) held to its attempt's records.

LeRobot itself cannot be installed beside mailroom (`lerobot` 0.4.4, the newest its
package index offers here, requires `av<16` and `rerun-sdk<0.27`, where mailroom's lock
holds av 18.1 and rerun-sdk 0.41), so it runs in a venv of its own; this reader states
the rules its loader applies, from its source (`lerobot/datasets/`: `utils.py`,
`dataset_metadata.py`, `io_utils.py`, `dataset_reader.py`, `video_utils.py`), so that a
broken rule is named, not only refused:

- `meta/info.json`: `codebase_version` "v3.0" (a lower major version is refused); a
  positive integer `fps`; every feature a dtype, a shape and names, no "/" in a name; the
  default features; the path templates; totals that match what the files hold.
- `meta/tasks.parquet`: read with pandas, the task text is the index named "task";
  `task_index` in order from 0.
- `meta/episodes/*/*.parquet`, sorted: episodes by position (`episode_index` 0..N-1), each
  its data file, its `[dataset_from_index, dataset_to_index)` rows, and per video its file
  and `[from_timestamp, to_timestamp)`.
- `data/*/*.parquet`, sorted: every non-video feature a column; `index` 0..total-1 in
  order; `frame_index` from 0 in each episode; `timestamp` = frame_index / fps.
- video frame i of an episode is the decoded frame nearest `from_timestamp + i / fps`,
  refused beyond `tolerance_s` (1e-4 s, the loader's default).
- `meta/stats.json`: every numeric feature's min, max, mean, std, count and quantiles,
  each of the feature's shape ((3, 1, 1) for an image, (1,) for count).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import av
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image
from recorded_events import attempt_events

# The most an H.264 frame's pixels may differ on average from the image it encoded.
LOSSY = 4.0
DEFAULT_FEATURES = ("timestamp", "frame_index", "episode_index", "index", "task_index")
STATISTICS = ("min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99")
TOLERANCE_S = 1e-4


@dataclass(frozen=True)
class LoadedDataset:
    root: Path
    info: dict[str, Any]
    tasks: list[str]
    episodes: list[dict[str, Any]]
    frames: list[dict[str, Any]]  # every row of the data files, in `index` order
    stats: dict[str, dict[str, Any]]

    @property
    def fps(self) -> int:
        fps: int = self.info["fps"]
        return fps

    def video_keys(self) -> list[str]:
        return [k for k, f in self.info["features"].items() if f["dtype"] == "video"]

    def episode_frames(self, episode_index: int) -> list[dict[str, Any]]:
        episode = self.episodes[episode_index]
        return self.frames[episode["dataset_from_index"] : episode["dataset_to_index"]]

    def episode_images(self, episode_index: int, key: str) -> list[npt.NDArray[np.uint8]]:
        """Frame i of the episode's video `key`: decoded nearest from_timestamp + i / fps,
        within the loader's tolerance."""
        episode = self.episodes[episode_index]
        path = self.root / self.info["video_path"].format(
            video_key=key,
            chunk_index=episode[f"videos/{key}/chunk_index"],
            file_index=episode[f"videos/{key}/file_index"],
        )
        times, images = _decoded(path)
        start = episode[f"videos/{key}/from_timestamp"]
        out = []
        for i in range(episode["length"]):
            wanted = start + i / self.fps
            nearest = int(np.argmin(np.abs(times - wanted)))
            gap = abs(times[nearest] - wanted)
            assert gap <= TOLERANCE_S, f"{path}: no frame within {TOLERANCE_S} s of {wanted}"
            out.append(images[nearest])
        end = episode[f"videos/{key}/to_timestamp"]
        assert abs(end - (start + episode["length"] / self.fps)) <= TOLERANCE_S
        return out


def _decoded(path: Path) -> tuple[npt.NDArray[np.float64], list[npt.NDArray[np.uint8]]]:
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        times, images = [], []
        for frame in container.decode(stream):
            assert frame.pts is not None and frame.time_base is not None
            times.append(float(frame.pts * frame.time_base))
            images.append(np.asarray(frame.to_ndarray(format="rgb24"), dtype=np.uint8))
    return np.asarray(times), images


def _table(paths: list[Path]) -> pa.Table:
    assert paths, "no file"
    return pa.concat_tables([pq.read_table(p) for p in paths])


def _check_info(info: dict[str, Any]) -> None:
    assert info["codebase_version"] == "v3.0"
    assert isinstance(info["fps"], int) and not isinstance(info["fps"], bool) and info["fps"] > 0
    for name in ("total_episodes", "total_frames", "total_tasks", "chunks_size"):
        assert isinstance(info[name], int) and info[name] >= 0, name
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    features = info["features"]
    for name, feature in features.items():
        assert "/" not in name, name
        assert {"dtype", "shape", "names"} <= set(feature), name
        assert isinstance(feature["shape"], list) and all(
            isinstance(n, int) for n in feature["shape"]
        )
        if feature["dtype"] == "video":
            assert len(feature["shape"]) == 3 and feature["shape"][2] == 3
            assert feature["names"] == ["height", "width", "channels"]
            video = feature["info"]
            assert [video["video.height"], video["video.width"]] == feature["shape"][:2]
            assert video["video.fps"] == info["fps"] and video["video.pix_fmt"] == "yuv420p"
        elif feature["names"] is not None:
            assert len(feature["names"]) == feature["shape"][0], name
    for name in DEFAULT_FEATURES:
        assert features[name]["shape"] == [1], name
    has_video = any(f["dtype"] == "video" for f in features.values())
    expected_video = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    assert info["video_path"] == (expected_video if has_video else None)
    assert info["splits"] == {"train": f"0:{info['total_episodes']}"}


def _tasks(root: Path) -> list[str]:
    table = pq.read_table(root / "meta" / "tasks.parquet")
    pandas = json.loads(table.schema.metadata[b"pandas"])
    assert pandas["index_columns"] == ["task"], "the task text is not the index named 'task'"
    indexes = table.column("task_index").to_pylist()
    assert indexes == list(range(len(indexes)))
    tasks: list[str] = table.column("task").to_pylist()
    return tasks


def _check_stats(stats: dict[str, dict[str, Any]], features: dict[str, Any]) -> None:
    for name, feature in features.items():
        if feature["dtype"] == "string":
            continue
        assert name in stats, f"no statistics of {name}"
        shape = (3, 1, 1) if feature["dtype"] == "video" else tuple(feature["shape"])
        for statistic in STATISTICS:
            value = np.asarray(stats[name][statistic])
            assert value.shape == ((1,) if statistic == "count" else shape), (name, statistic)


def load_dataset(root: Path) -> LoadedDataset:
    """The dataset at `root`, every rule above checked (an AssertionError names the one
    broken)."""
    info = json.loads((root / "meta" / "info.json").read_text("utf-8"))
    _check_info(info)
    features = info["features"]
    tasks = _tasks(root)
    assert len(tasks) == info["total_tasks"]

    episodes = _table(sorted(root.glob("meta/episodes/chunk-*/file-*.parquet"))).to_pylist()
    assert [e["episode_index"] for e in episodes] == list(range(info["total_episodes"]))
    at = 0
    for episode in episodes:
        assert episode["dataset_from_index"] == at, "episodes' rows are not contiguous"
        assert episode["dataset_to_index"] - at == episode["length"] > 0
        at = episode["dataset_to_index"]
        assert all(t in tasks for t in episode["tasks"])
    assert at == info["total_frames"]

    data = _table(sorted(root.glob("data/chunk-*/file-*.parquet")))
    columns = [k for k, f in features.items() if f["dtype"] != "video"]
    assert sorted(data.column_names) == sorted(columns)
    for name in columns:
        field = data.schema.field(name)
        if features[name]["shape"] != [1]:
            assert pa.types.is_fixed_size_list(field.type), name
            assert field.type.list_size == features[name]["shape"][0], name
    frames = data.to_pylist()
    assert [f["index"] for f in frames] == list(range(info["total_frames"]))
    for episode in episodes:
        rows = frames[episode["dataset_from_index"] : episode["dataset_to_index"]]
        assert [r["frame_index"] for r in rows] == list(range(episode["length"]))
        assert {r["episode_index"] for r in rows} == {episode["episode_index"]}
        for row in rows:
            assert abs(row["timestamp"] - row["frame_index"] / info["fps"]) < 1e-6
            assert 0 <= row["task_index"] < len(tasks)
    stats = json.loads((root / "meta" / "stats.json").read_text("utf-8"))
    _check_stats(stats, features)
    return LoadedDataset(root, info, tasks, episodes, frames, stats)


# against the run's records --------------------------------------------------------


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _png(path: Path) -> npt.NDArray[np.float64]:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"), dtype=np.float64)


def _video(path: Path) -> list[npt.NDArray[np.float64]]:
    import av

    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24").astype(np.float64) for f in container.decode(video=0)]


def _difference(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> float:
    return float(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)).mean())


class EpisodeSource(Protocol):
    """A dataset as a reader handed it out: `LoadedDataset` or LeRobot's own."""

    @property
    def tasks(self) -> list[str]: ...

    @property
    def episodes(self) -> list[dict[str, Any]]: ...

    def video_keys(self) -> list[str]: ...

    def episode_frames(self, episode_index: int) -> list[dict[str, Any]]: ...

    def episode_images(self, episode_index: int, key: str) -> list[npt.NDArray[np.uint8]]: ...


def assert_episode_matches_records(
    dataset: EpisodeSource, index: int, run_dir: Path, cameras: Sequence[str]
) -> None:
    """Episode `index` against its attempt's result, steps, first observation and, for
    each of `cameras` (none: a dataset without images), the images delivered and the
    episode's video."""
    episode = dataset.episodes[index]
    attempt = run_dir / "episodes" / episode["mailroom/attempt_id"]
    result = json.loads((attempt / "result.json").read_text())
    steps = _jsonl(attempt / "steps.jsonl")
    rows = dataset.episode_frames(index)
    controls = result["counters"]["executed_controls"]
    assert episode["length"] == len(rows) == len(steps) == controls > 0
    actions = np.asarray([r["action"] for r in rows], dtype=np.float64)
    assert actions == pytest.approx(np.asarray([s["action"] for s in steps]), abs=1e-6)
    assert [r["next.done"] for r in rows] == [False] * (controls - 1) + [True]
    first = result["counters"]["first_success_control"]
    assert [r["next.success"] for r in rows] == [
        first is not None and k + 1 >= first for k in range(controls)
    ]
    assert (result["outcome"] == "success") == any(r["next.success"] for r in rows)
    first_observation = json.loads((attempt / "observations" / "obs-1.json").read_text())
    assert dataset.tasks[rows[0]["task_index"]] == first_observation["instruction"]
    assert episode["tasks"] == [first_observation["instruction"]]
    if result["settings"]["proprio"]:
        proprio = first_observation["proprio"]
        before = [proprio["joint_pos"] + proprio["gripper_qpos"]]
        before += [s["state"] for s in steps[:-1]]
        states = np.asarray([r["observation.state"] for r in rows], dtype=np.float64)
        assert states == pytest.approx(np.asarray(before), abs=1e-6)
        assert len({tuple(row) for row in before}) > 1  # states that can be told apart
    else:
        assert "observation.state" not in rows[0]
    assert sorted(dataset.video_keys()) == sorted(f"observation.images.{c}" for c in cameras)
    if not cameras:
        return
    shown: dict[int, int] = {}  # control -> the observation delivered before it
    for event in attempt_events(attempt, "observation_published"):
        document = json.loads(
            (attempt / "observations" / f"obs-{event['sequence']}.json").read_text()
        )
        shown[document["counters"]["executed_controls"]] = event["sequence"]
    assert 0 in shown
    for camera in cameras:
        images = dataset.episode_images(index, f"observation.images.{camera}")
        video = _video(attempt / "videos" / f"{camera}.mp4")
        assert len(video) == controls
        for k, image in enumerate(images):
            assert image.shape == video[0].shape
            if k in shown:  # what the actor was shown before control k
                png = _png(attempt / "observations" / f"obs-{shown[k]}-{camera}.png")
                assert _difference(image, png) < LOSSY, (k, camera)
            else:  # the camera after control k-1
                assert _difference(image, video[k - 1]) < LOSSY, (k, camera)
