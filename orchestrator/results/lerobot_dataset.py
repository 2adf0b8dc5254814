"""The LeRobot dataset format, version 3.0, as this project writes it: its file layout,
its feature descriptions and its statistics (no LeRobot code is needed to write one).

    meta/info.json                              the dataset: version, fps, features, totals
    meta/stats.json                             each feature's statistics over the dataset
    meta/tasks.parquet                          task_index by task (a pandas index "task")
    meta/episodes/chunk-000/file-000.parquet    one row per episode: where its frames are
    data/chunk-000/file-000.parquet             one row per frame
    videos/<image key>/chunk-000/file-000.mp4   one camera's frames, episode after episode

Files are numbered within a chunk folder up to `CHUNKS_SIZE` a folder; a data file holds
episodes until it reaches `DATA_FILE_SIZE_MB`, a video file until `VIDEO_FILE_SIZE_MB`.
A frame's `index` runs over the whole dataset from 0; `frame_index` from 0 in each
episode; `timestamp` is `frame_index / fps`. An episode's frames in a shared video file
start at its `from_timestamp` (its first frame's number in the file over fps), so that
frame i of the episode is decoded at `from_timestamp + i / fps`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000
DATA_FILE_SIZE_MB = 100
VIDEO_FILE_SIZE_MB = 200
INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
# The features every LeRobot dataset has, each one number a frame.
INDEX_FEATURES: dict[str, str] = {
    "timestamp": "float32",
    "frame_index": "int64",
    "episode_index": "int64",
    "index": "int64",
    "task_index": "int64",
}
QUANTILES: dict[str, float] = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
# Frames of an episode an image's statistics are computed from (evenly spaced).
IMAGE_STATS_FRAMES = 100

Stats = dict[str, npt.NDArray[np.float64]]


def file_location(number: int) -> dict[str, int]:
    """The chunk and file index of a feature's `number`-th file (from 0)."""
    return {"chunk_index": number // CHUNKS_SIZE, "file_index": number % CHUNKS_SIZE}


def image_key(camera: str) -> str:
    return f"observation.images.{camera}"


def vector_feature(names: Sequence[str]) -> dict[str, Any]:
    return {"dtype": "float32", "shape": [len(names)], "names": list(names)}


def scalar_feature(dtype: str) -> dict[str, Any]:
    return {"dtype": dtype, "shape": [1], "names": None}


def video_feature(height: int, width: int, fps: int, codec: str) -> dict[str, Any]:
    return {
        "dtype": "video",
        "shape": [height, width, 3],
        "names": ["height", "width", "channels"],
        "info": {
            "video.height": height,
            "video.width": width,
            "video.codec": codec,
            "video.pix_fmt": "yuv420p",
            "video.is_depth_map": False,
            "video.fps": fps,
            "video.channels": 3,
            "has_audio": False,
        },
    }


def info_document(
    *,
    fps: int,
    features: Mapping[str, Any],
    episodes: int,
    frames: int,
    tasks: int,
    has_video: bool,
    extra: Mapping[str, Any],
) -> dict[str, Any]:
    """`meta/info.json`; `extra` is this project's own key (LeRobot reads past it)."""
    return {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": None,
        "total_episodes": episodes,
        "total_frames": frames,
        "total_tasks": tasks,
        "chunks_size": CHUNKS_SIZE,
        "data_files_size_in_mb": DATA_FILE_SIZE_MB,
        "video_files_size_in_mb": VIDEO_FILE_SIZE_MB,
        "fps": fps,
        "splits": {"train": f"0:{episodes}"},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if has_video else None,
        "features": dict(features),
        **extra,
    }


def tasks_table(tasks: Sequence[str]) -> pa.Table:
    """`meta/tasks.parquet`: a `task_index` column indexed by the task's text, as pandas
    writes a DataFrame whose index is named "task" (LeRobot reads it with pandas)."""
    table = pa.table(
        {
            "task_index": pa.array(range(len(tasks)), pa.int64()),
            "task": pa.array(list(tasks), pa.string()),
        }
    )
    pandas = {
        "index_columns": ["task"],
        "column_indexes": [
            {
                "name": None,
                "field_name": None,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": {"encoding": "UTF-8"},
            }
        ],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {
                "name": "task",
                "field_name": "task",
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": None,
            },
        ],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }
    return table.replace_schema_metadata({"pandas": json.dumps(pandas)})


# statistics ----------------------------------------------------------------------------


def feature_stats(values: npt.NDArray[Any]) -> Stats:
    """Per component over frames (axis 0): min, max, mean, std, count and quantiles."""
    data = np.asarray(values, dtype=np.float64)
    if data.ndim == 1:
        data = data.reshape(-1, 1)
    stats: Stats = {
        "min": data.min(axis=0),
        "max": data.max(axis=0),
        "mean": data.mean(axis=0),
        "std": data.std(axis=0),
        "count": np.array([len(data)], dtype=np.float64),
    }
    for name, q in QUANTILES.items():
        stats[name] = np.quantile(data, q, axis=0)
    return stats


def image_stats(frames: npt.NDArray[np.uint8]) -> Stats:
    """Per channel, over up to IMAGE_STATS_FRAMES evenly spaced frames, in [0, 1]; each
    statistic of shape (3, 1, 1) as LeRobot keeps an image's; count is the frames'."""
    picked = np.linspace(0, len(frames) - 1, min(len(frames), IMAGE_STATS_FRAMES)).astype(int)
    pixels = frames[picked].reshape(-1, 3).astype(np.float64) / 255.0
    stats = feature_stats(pixels)
    shaped = {k: v.reshape(3, 1, 1) for k, v in stats.items() if k != "count"}
    return {**shaped, "count": np.array([len(frames)], dtype=np.float64)}


def aggregate_stats(parts: Sequence[Stats]) -> Stats:
    """A feature's statistics over several episodes: extremes of extremes, the
    count-weighted mean, the pooled standard deviation, the count-weighted mean of each
    quantile (LeRobot's own approximation) and the summed count."""
    counts = np.array([p["count"][0] for p in parts], dtype=np.float64)
    weights = counts / counts.sum()

    def weighted(key: str) -> npt.NDArray[np.float64]:
        total: npt.NDArray[np.float64] = sum(
            (w * p[key] for w, p in zip(weights, parts, strict=True)),
            start=np.zeros_like(parts[0][key]),
        )
        return total

    mean = weighted("mean")
    variance: npt.NDArray[np.float64] = sum(
        (
            w * (p["std"] ** 2 + (p["mean"] - mean) ** 2)
            for w, p in zip(weights, parts, strict=True)
        ),
        start=np.zeros_like(mean),
    )
    out: Stats = {
        "min": np.min(np.stack([p["min"] for p in parts]), axis=0),
        "max": np.max(np.stack([p["max"] for p in parts]), axis=0),
        "mean": mean,
        "std": np.sqrt(variance),
        "count": np.array([counts.sum()], dtype=np.float64),
    }
    for name in QUANTILES:
        out[name] = weighted(name)
    return out


def stats_document(stats: Mapping[str, Stats]) -> dict[str, dict[str, Any]]:
    """`meta/stats.json`: each feature's statistics as (nested) lists."""
    return {
        feature: {name: value.tolist() for name, value in values.items()}
        for feature, values in stats.items()
    }


def flat_stats_columns(stats: Mapping[str, Stats]) -> dict[str, Any]:
    """An episode's statistics as the `stats/<feature>/<statistic>` columns of its row."""
    return {
        f"stats/{feature}/{name}": value.tolist()
        for feature, values in stats.items()
        for name, value in values.items()
    }
