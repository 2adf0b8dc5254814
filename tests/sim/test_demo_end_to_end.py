"""`mailroom demo` on the real simulator: a blinded episode through a real mailbox."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import leaks_under, mailroom_exe
from lerobot_client import assert_lerobot_reads_what_the_reader_reads, open_with_lerobot
from lerobot_reader import assert_episode_matches_records, load_dataset
from mailroom.mailbox.schemas import schema_errors


@pytest.fixture(scope="module")
def demo_run(
    tmp_path_factory: pytest.TempPathFactory, module_mailbox_root: Path
) -> tuple[dict[str, Any], Path, Path]:
    base = tmp_path_factory.mktemp("demo")
    run_dir, mailbox_root = base / "private-run-7f3a", module_mailbox_root / "mb"
    proc = subprocess.run(
        [
            mailroom_exe(),
            "demo",
            "--json",
            "--run-dir",
            str(run_dir),
            "--mailbox-root",
            str(mailbox_root),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout), run_dir, mailbox_root


def test_result_document_validates_and_counts_add_up(
    demo_run: tuple[dict[str, Any], Path, Path],
) -> None:
    doc, run_dir, _ = demo_run
    assert schema_errors("mailroom.episode_result/v8", doc) == []
    c = doc["counters"]
    assert c["settling_controls"] == 10
    assert (
        c["policy_calls"] == c["action_decisions"] + c["rejected_responses"] + c["stop_responses"]
    )
    assert 0 < c["executed_controls"] <= 5 * c["action_decisions"]
    assert c["stop_responses"] == 1 and doc["termination"] == "actor_stop"
    assert doc["outcome"] == "failure"
    assert all(
        doc["usage"][k] is None
        for k in ("provider_requests", "input_tokens", "output_tokens", "cost")
    )
    case = doc["case"]
    assert (case["suite"], case["task_index"], case["init_state_index"], case["seed"]) == (
        "libero_10",
        0,
        0,
        20260907,
    )
    # The completion marker in the private run directory is the same document.
    results = list(run_dir.glob("episodes/*/result.json"))
    assert len(results) == 1 and json.loads(results[0].read_text()) == doc


def test_mailbox_follows_protocol_names(demo_run: tuple[dict[str, Any], Path, Path]) -> None:
    doc, _, mailbox_root = demo_run
    endpoints = [p for p in mailbox_root.iterdir()]
    assert len(endpoints) == 1 and re.fullmatch(r"[0-9a-f]{32}", endpoints[0].name)
    ep = endpoints[0]
    # The actor saw inbox/, outbox/ and scratch/; its own /tmp and /dev/shm (one tmpfs
    # with its scratch/, as root) are kept beside them once it stopped, for the audit.
    kept = ["dev-shm", "tmp"] if os.geteuid() == 0 else []
    assert sorted(p.name for p in ep.iterdir()) == sorted(["inbox", "outbox", "scratch", *kept])
    n = doc["counters"]["policy_calls"]
    expected = {"closed.json"}
    for i in range(1, n + 1):
        expected |= {f"obs-{i}.json", f"obs-{i}-agentview.png", f"obs-{i}-robot0_eye_in_hand.png"}
    assert {p.name for p in (ep / "outbox").iterdir()} == expected
    for i in range(1, n + 1):
        obs = json.loads((ep / "outbox" / f"obs-{i}.json").read_text())
        assert schema_errors("mailroom.observation/v1", obs) == []
        assert obs["sequence"] == i and obs["response_file"] == f"inbox/resp-{i}.json"
    closed = json.loads((ep / "outbox" / "closed.json").read_text())
    assert closed == {"schema": "mailroom.closed/v1", "last_sequence": n}
    assert list((ep / "inbox").iterdir()) == []  # every response was claimed out


def test_nothing_under_the_mailbox_root_identifies_the_case(
    demo_run: tuple[dict[str, Any], Path, Path],
) -> None:
    doc, run_dir, mailbox_root = demo_run
    case = doc["case"]
    needles = [
        case["suite"],
        "libero",
        case["task_name"],
        Path(case["task_name"]).name + ".bddl",
        str(case["seed"]),
        run_dir.name,
        "init_state",
        "seed",
        "suite",
        "task_index",
        case["bddl_sha256"],
        case["state_sha256"],
    ]
    assert leaks_under(mailbox_root, needles) == []


def test_every_camera_video_decodes_to_one_frame_per_executed_control(
    demo_run: tuple[dict[str, Any], Path, Path],
) -> None:
    from mailroom.orchestrator.episode.video import probe_video

    doc, run_dir, _ = demo_run
    videos = sorted(run_dir.glob("episodes/*/videos/*.mp4"))
    assert [v.name for v in videos] == ["agentview.mp4", "robot0_eye_in_hand.mp4"]
    for video in videos:
        probe = probe_video(video)
        assert probe.frames == doc["counters"]["executed_controls"]
        assert probe.fps == 20
    steps = next(run_dir.glob("episodes/*/steps.jsonl")).read_text().splitlines()
    assert len(steps) == doc["counters"]["executed_controls"]


def test_the_demo_is_a_confined_run_that_report_and_audit_read(
    demo_run: tuple[dict[str, Any], Path, Path],
) -> None:
    doc, run_dir, _ = demo_run
    assert doc["confinement"] == {"mode": "sandbox", "network": "none"}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["schema"] == "mailroom.run_manifest/v8"
    assert schema_errors("mailroom.run_manifest/v8", manifest) == []
    assert manifest["confinement"]["mode"] == "sandbox"
    report = subprocess.run(
        [mailroom_exe(), "report", str(run_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    overall = json.loads(report.stdout)
    assert overall["confinement_modes"] == {"sandbox": 1}
    assert overall["overall"]["not_confined"] == 0 and overall["not_confined_attempts"] == []
    words = subprocess.run(
        [mailroom_exe(), "report", str(run_dir)], capture_output=True, text=True, timeout=120
    )
    assert "confinement of the attempts: sandbox 1" in " ".join(words.stderr.split())
    audit = subprocess.run(
        [mailroom_exe(), "audit", str(run_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert audit.returncode == 0 and json.loads(audit.stdout)["clean"] is True
    # The run directory is the orchestrator's alone: owner-only folders and files.
    for path in [run_dir, *run_dir.rglob("*")]:
        want = 0o700 if path.is_dir() else 0o600
        assert path.stat().st_mode & 0o777 == want, path


def test_the_demos_run_replays_as_reproduced(demo_run: tuple[dict[str, Any], Path, Path]) -> None:
    """Recorded in full (images and videos kept), re-executed from its record alone."""
    _, run_dir, _ = demo_run
    done = subprocess.run(
        [mailroom_exe(), "replay", str(run_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (verdict,) = json.loads(done.stdout)["verdicts"]
    assert verdict["verdict"] == "reproduced" and verdict["checked_observations"] == 4


def test_the_demo_run_is_a_lerobot_dataset_of_its_records(
    demo_run: tuple[dict[str, Any], Path, Path], tmp_path: Path
) -> None:
    """`mailroom export --format lerobot` of a real LIBERO episode, read back by the rules
    of LeRobot's loader and by LeRobot's own `LeRobotDataset`: both cameras at the
    delivered 256 px, each image before its control (the PNGs delivered, the episode
    video's frames between), 20 fps, the task as delivered, and no path of this machine."""
    _, run_dir, mailbox_root = demo_run
    out = tmp_path / "dataset"
    exported = subprocess.run(
        [mailroom_exe(), "export", str(run_dir), "--format", "lerobot", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert exported.returncode == 0, exported.stderr[-3000:]
    dataset = load_dataset(out)
    assert dataset.fps == 20 and len(dataset.episodes) == 1
    cameras = ("agentview", "robot0_eye_in_hand")
    for camera in cameras:
        assert dataset.info["features"][f"observation.images.{camera}"]["shape"] == [256, 256, 3]
    assert_episode_matches_records(dataset, 0, run_dir, cameras)
    client = open_with_lerobot(out, tmp_path / "client")
    assert_lerobot_reads_what_the_reader_reads(client, dataset, len(dataset.frames), 20)
    assert_episode_matches_records(client, 0, run_dir, cameras)
    assert leaks_under(out, [str(run_dir), str(mailbox_root), str(run_dir.parent)]) == []
