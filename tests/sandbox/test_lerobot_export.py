"""`mailroom export --format lerobot` on real runs of the toy family (a real `mailroom
launch`, its fake simulator, the sandboxed diagnostic actor acting five controls a call),
each dataset read back by the rules of LeRobot's own loader (`lerobot_reader.py`) and by
LeRobot itself (`LeRobotDataset` in its own venv, `lerobot_client.py`), and compared
with the attempt's records:

- one episode per attempt, in plan order, its frames the executed controls: each action
  the one steps.jsonl recorded; `observation.state` the state before it (the first
  observation's for frame 0, then where the control before ended); `next.success` from
  the control the native scorer first held at; `next.done` on the last frame;
- each camera's frame k the image before control k: the PNG delivered where an
  observation went out at control k, else the episode video's frame k-1;
- LeRobot's items the rows and images the reader found, a frame's next action
  (`delta_timestamps`) padded at its episode's end, never the next episode's;
- the task the instruction delivered; the run's identity in `meta/info.json`, and no
  path of this machine anywhere in the dataset;
- a minimal record: no image feature; an attempt whose image is not the one delivered
  is skipped and listed (exit 4); a destination holding something else is refused
  (exit 2), a dataset of this export's is replaced.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import toy_family_runs
from client_venvs import assert_installed_as_locked
from conftest import REPO, assert_usage_error, leaks_under, run_cli
from lerobot_client import (
    assert_lerobot_reads_what_the_reader_reads,
    open_with_lerobot,
)
from lerobot_reader import assert_episode_matches_records, load_dataset
from locked_packages import LEROBOT_LOCKS
from mailroom.hashing import sha256_bytes
from mailroom.orchestrator.results.steps_file import STATE_LAYOUT
from PIL import Image
from toy_family_runs import launch_toy, plan_toy

CAMERAS = ("overhead",)
ACTION_LAYOUT = ["vx", "vy", "vz", "wx", "wy", "wz", "grip"]
SUCCEEDS = "toyworld_shelf-t000-i00-o0-s20260907-a1"  # succeeds at its third control
OTHER = "toyworld_shelf-t001-i00-o0-s20260907-a1"

# A fixture of tests/support, used by name.
toy_env = toy_family_runs.toy_env


def _launch(
    base: Path, env: dict[str, str], mailbox: Path, *options: str
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    plan = plan_toy(base / "plan.json", "toyworld_shelf", env)
    run_dir = base / "run"
    launch_toy(plan, run_dir, mailbox, env, "--max-policy-calls", "3", *options)
    return run_dir, _export(run_dir, base / "dataset", env)


def _export(run_dir: Path, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli(
        *("export", str(run_dir), "--format", "lerobot", "--out", str(out), "--json"), env=env
    )


@pytest.fixture(scope="module")
def full_run(
    toy_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory, module_mailbox_root: Path
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    base = tmp_path_factory.mktemp("lerobot-full")
    return _launch(base, toy_env, module_mailbox_root / "lerobot-full", "--proprio")


@pytest.fixture(scope="module")
def minimal_run(
    toy_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory, module_mailbox_root: Path
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    base = tmp_path_factory.mktemp("lerobot-minimal")
    return _launch(base, toy_env, module_mailbox_root / "lerobot-minimal", "--record", "minimal")


def _summary(exported: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert exported.returncode == 0, exported.stderr
    document: dict[str, Any] = json.loads(exported.stdout)
    assert document["format"] == "lerobot" and document["skipped"] == []
    return document


def test_each_attempt_is_an_episode_of_its_records(
    full_run: tuple[Path, subprocess.CompletedProcess[str]], module_mailbox_root: Path
) -> None:
    run_dir, exported = full_run
    summary = _summary(exported)
    dataset = load_dataset(Path(summary["out"]))
    assert [e["mailroom/attempt_id"] for e in dataset.episodes] == [SUCCEEDS, OTHER]
    assert summary["episodes"] == 2 and summary["cameras"] == list(CAMERAS) and summary["proprio"]
    info = dataset.info
    assert info["fps"] == 10  # the toy family's control rate
    assert info["features"]["action"]["names"] == ACTION_LAYOUT
    assert info["features"]["observation.state"]["names"] == list(STATE_LAYOUT)
    assert info["features"]["observation.images.overhead"]["shape"] == [64, 64, 3]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    identity = info["mailroom"]
    assert identity["run_id"] == manifest["run_id"]
    assert identity["plan_sha256"] == manifest["protocol"]["plan_sha256"]
    assert identity["manifest_sha256"] == sha256_bytes((run_dir / "manifest.json").read_bytes())
    assert identity["profile"] == "scripted_diagnostic"
    assert identity["observation"] == "before_action"
    for index in range(len(dataset.episodes)):
        assert_episode_matches_records(dataset, index, run_dir, CAMERAS)
    # The dataset's statistics are its frames' (a feature's count: its frames).
    actions = np.asarray([r["action"] for r in dataset.frames])
    assert dataset.stats["action"]["mean"] == pytest.approx(actions.mean(axis=0).tolist(), abs=1e-5)
    assert dataset.stats["action"]["count"] == [len(dataset.frames)]
    # No path of this machine: the run, the mailbox, the checkout.
    needles = [str(run_dir), str(module_mailbox_root), str(REPO), str(run_dir.parent)]
    assert leaks_under(Path(summary["out"]), needles) == []


def test_lerobot_s_own_loader_reads_each_episode_as_recorded(
    full_run: tuple[Path, subprocess.CompletedProcess[str]],
    minimal_run: tuple[Path, subprocess.CompletedProcess[str]],
    tmp_path: Path,
) -> None:
    assert_installed_as_locked("lerobot", LEROBOT_LOCKS)
    for (run_dir, exported), cameras in ((full_run, CAMERAS), (minimal_run, ())):
        out = Path(_summary(exported)["out"])
        client = open_with_lerobot(out, tmp_path / out.parent.name)
        assert client.num_episodes == len(list((run_dir / "episodes").iterdir())) > 0
        reader = load_dataset(out)
        assert_lerobot_reads_what_the_reader_reads(client, reader, len(reader.frames), reader.fps)
        for index in range(client.num_episodes):
            assert_episode_matches_records(client, index, run_dir, cameras)
        assert ("observation.state" in client.features) == (cameras == CAMERAS)


def test_a_minimal_record_gives_a_dataset_without_images(
    minimal_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    run_dir, exported = minimal_run
    summary = _summary(exported)
    assert summary["cameras"] == [] and not summary["proprio"]
    dataset = load_dataset(Path(summary["out"]))
    assert dataset.info["video_path"] is None
    assert not (Path(summary["out"]) / "videos").exists()
    for index in range(len(dataset.episodes)):
        assert_episode_matches_records(dataset, index, run_dir, ())


def test_an_attempt_that_cannot_be_trusted_is_skipped_and_listed(
    full_run: tuple[Path, subprocess.CompletedProcess[str]],
    toy_env: dict[str, str],
    tmp_path: Path,
) -> None:
    run_dir = shutil.copytree(full_run[0], tmp_path / "run", symlinks=True)
    image = run_dir / "episodes" / OTHER / "observations" / "obs-1-overhead.png"
    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), (255, 0, 255)).save(buffer, format="PNG")
    image.write_bytes(buffer.getvalue())
    exported = _export(run_dir, tmp_path / "dataset", toy_env)
    assert exported.returncode == 4, exported.stderr
    document = json.loads(exported.stdout)
    assert [s["file"] for s in document["skipped"]] == [f"episodes/{OTHER}"]
    assert "is not the image its observation delivered" in document["skipped"][0]["reason"]
    dataset = load_dataset(tmp_path / "dataset")
    assert [e["mailroom/attempt_id"] for e in dataset.episodes] == [SUCCEEDS]
    assert_episode_matches_records(dataset, 0, run_dir, CAMERAS)


def test_a_destination_holding_something_else_is_refused(
    full_run: tuple[Path, subprocess.CompletedProcess[str]],
    toy_env: dict[str, str],
    tmp_path: Path,
) -> None:
    run_dir = full_run[0]
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("kept")
    refused = _export(run_dir, foreign, toy_env)
    assert_usage_error(refused, "is not a dataset this export wrote")
    assert (foreign / "notes.txt").read_text() == "kept"
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]  # no temporary left
    # A dataset this export wrote is replaced whole.
    ours = tmp_path / "dataset"
    assert _export(run_dir, ours, toy_env).returncode == 0
    (ours / "meta" / "stale.txt").write_text("from before")
    again = _export(run_dir, ours, toy_env)
    assert again.returncode == 0, again.stderr
    assert not (ours / "meta" / "stale.txt").exists()
    load_dataset(ours)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dataset", "mine"]
