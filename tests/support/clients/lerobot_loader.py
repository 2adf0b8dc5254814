"""Run by LeRobot's own venv (`make clients`), never by mailroom's: open a LeRobot
dataset with `lerobot`'s `LeRobotDataset`, offline, and write out what it reads, for
`lerobot_client.py` to compare with a run's records.

    python lerobot_loader.py DATASET_ROOT OUT.npz

Read three ways, as training code reads a dataset: item by item (every frame, each
camera's image decoded by LeRobot's video decoder), with `delta_timestamps` asking each
frame for the next frame's action (LeRobot pads past an episode's end and says so in
`action_is_pad`), and through a torch `DataLoader`. OUT.npz holds each image as uint8
HxWxC under "<feature>/<index>" and everything else as JSON under "document".
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lerobot.datasets.lerobot_dataset import LeRobotDataset

REPO_ID = "mailroom/export"  # a name only: the dataset is read from its root, offline


def _plain(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def main(root: Path, out: Path) -> None:
    dataset = LeRobotDataset(REPO_ID, root=root)
    meta = dataset.meta
    video_keys = list(meta.video_keys)
    tasks = sorted(meta.tasks.index, key=lambda task: int(meta.tasks.loc[task, "task_index"]))
    episodes = [
        {k: _plain(v) for k, v in row.items() if not k.startswith("stats/")}
        for row in meta.episodes
    ]
    frames: list[dict[str, Any]] = []
    images: dict[str, Any] = {}  # arrays, by name (savez takes them as keywords)
    for index in range(len(dataset)):
        item = dataset[index]
        row: dict[str, Any] = {}
        for key, value in item.items():
            if key in video_keys:  # float CxHxW in [0, 1], as LeRobot hands it to a policy
                pixels = (value * 255).round().clamp(0, 255).to(torch.uint8)
                images[f"{key}/{index}"] = pixels.permute(1, 2, 0).numpy()
            else:
                row[key] = _plain(value)
        frames.append(row)

    ahead = LeRobotDataset(REPO_ID, root=root, delta_timestamps={"action": [0.0, 1 / meta.fps]})
    next_actions = [
        {
            "action": _plain(ahead[i]["action"]),
            "action_is_pad": _plain(ahead[i]["action_is_pad"]),
        }
        for i in range(len(ahead))
    ]

    loader = torch.utils.data.DataLoader(dataset, batch_size=4, shuffle=False, num_workers=0)
    batches = [
        {
            "index": _plain(batch["index"]),
            "shapes": {k: list(v.shape) for k, v in batch.items() if isinstance(v, torch.Tensor)},
        }
        for batch in loader
    ]
    document = {
        "fps": meta.fps,
        "length": len(dataset),
        "num_episodes": dataset.num_episodes,
        "video_keys": video_keys,
        "features": meta.features,
        "tasks": tasks,
        "episodes": episodes,
        "frames": frames,
        "next_actions": next_actions,
        "batches": batches,
    }
    np.savez(out, document=np.array(json.dumps(document)), **images)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
