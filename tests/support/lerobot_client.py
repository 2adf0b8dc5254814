"""A LeRobot export opened by LeRobot itself: `lerobot`'s `LeRobotDataset` in its own
venv (`client_venvs.py`, requirements/lerobot.txt), run offline on the dataset by
`clients/lerobot_loader.py`; what it read comes back as a `ClientDataset`, which
`lerobot_reader.assert_episode_matches_records` holds to the run's records like the
structural reader's."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from client_venvs import run_client
from lerobot_reader import EpisodeSource

CLIENT = "lerobot"


@dataclass(frozen=True)
class ClientDataset:
    """What `LeRobotDataset` handed out: every item, its episodes' metadata, the next
    action with its padding flag, the DataLoader's batches."""

    fps: int
    length: int
    num_episodes: int
    features: dict[str, Any]
    tasks: list[str]
    episodes: list[dict[str, Any]]
    frames: list[dict[str, Any]]
    next_actions: list[dict[str, Any]]
    batches: list[dict[str, Any]]
    keys: list[str]
    images: dict[str, npt.NDArray[np.uint8]]

    def video_keys(self) -> list[str]:
        return list(self.keys)

    def episode_frames(self, episode_index: int) -> list[dict[str, Any]]:
        episode = self.episodes[episode_index]
        return self.frames[episode["dataset_from_index"] : episode["dataset_to_index"]]

    def episode_images(self, episode_index: int, key: str) -> list[npt.NDArray[np.uint8]]:
        episode = self.episodes[episode_index]
        return [
            self.images[f"{key}/{index}"]
            for index in range(episode["dataset_from_index"], episode["dataset_to_index"])
        ]


def open_with_lerobot(root: Path, scratch: Path) -> ClientDataset:
    """The dataset at `root` as `LeRobotDataset` reads it (`scratch`: a folder of the
    test's for the client's output, home and caches)."""
    scratch.mkdir(parents=True, exist_ok=True)
    out = scratch / "read.npz"
    run_client(CLIENT, "lerobot_loader.py", scratch, str(root), str(out))
    with np.load(out) as saved:
        document = json.loads(str(saved["document"]))
        images = {name: np.asarray(saved[name]) for name in saved.files if name != "document"}
    return ClientDataset(
        fps=document["fps"],
        length=document["length"],
        num_episodes=document["num_episodes"],
        features=document["features"],
        tasks=document["tasks"],
        episodes=document["episodes"],
        frames=document["frames"],
        next_actions=document["next_actions"],
        batches=document["batches"],
        keys=document["video_keys"],
        images=images,
    )


def _mean_difference(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> float:
    return float(np.abs(a.astype(np.float64) - b.astype(np.float64)).mean())


# LeRobot decodes with torchcodec (FFmpeg's own colour conversion) where the reader uses
# PyAV's: the same H.264 frames may come back a grey level or so apart.
DECODERS_APART = 1.5


def assert_lerobot_reads_what_the_reader_reads(
    client: ClientDataset, reader: EpisodeSource, frames: int, fps: int
) -> None:
    """LeRobot's items are the rows and images the structural reader found; asking each
    frame for the next one's action (`delta_timestamps`) stays inside its episode; the
    DataLoader batches every frame once."""
    assert client.fps == fps and client.length == frames
    assert client.num_episodes == len(reader.episodes) == len(client.episodes)
    assert client.tasks == reader.tasks
    assert sorted(client.video_keys()) == sorted(reader.video_keys())
    for index, episode in enumerate(client.episodes):
        theirs, ours = client.episode_frames(index), reader.episode_frames(index)
        assert episode["mailroom/attempt_id"] == reader.episodes[index]["mailroom/attempt_id"]
        assert len(theirs) == len(ours) == episode["length"]
        for got, row in zip(theirs, ours, strict=True):
            assert got["task"] == client.tasks[row["task_index"]]
            for name, value in row.items():
                assert got[name] == pytest.approx(value, abs=1e-6), name
        for key in client.video_keys():
            for got_image, image in zip(
                client.episode_images(index, key), reader.episode_images(index, key), strict=True
            ):
                assert got_image.shape == image.shape
                assert _mean_difference(got_image, image) < DECODERS_APART, key
        # The next action, padded past the episode's end (never the next episode's).
        first = episode["dataset_from_index"]
        for k, row in enumerate(ours):
            ahead = client.next_actions[first + k]
            last = k == len(ours) - 1
            assert ahead["action_is_pad"] == [False, last]
            assert ahead["action"][0] == pytest.approx(row["action"], abs=1e-6)
            if not last:
                assert ahead["action"][1] == pytest.approx(ours[k + 1]["action"], abs=1e-6)
    batched = [i for batch in client.batches for i in batch["index"]]
    assert batched == list(range(frames))
    for batch in client.batches:
        size = len(batch["index"])
        assert batch["shapes"]["action"] == [size, 7]
        for key in client.video_keys():
            height, width, channels = client.features[key]["shape"]
            assert batch["shapes"][key] == [size, channels, height, width]
