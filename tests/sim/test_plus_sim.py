"""LIBERO-Plus on the real simulator: each offline category's perturbation, as delivered.

Every task here is compared with its base LIBERO task run the same way (same seed, same
released state), so what differs is the perturbation alone: a camera or background task
changes the agentview image only, noise changes it only, a robot-init task starts the arm
from the package's perturbed pose, a language task changes the instruction only. Then
the fast plan (one task of each offline category) runs through the mailbox with the
confined diagnostic actor (building and stepping background and layout tasks too), the
report has a row per category, and `mailroom replay` reproduces every category's episode.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import cli_plan, launch_command, mailroom_exe
from mailroom.benchmarks.libero.adapter import LiberoAdapter
from mailroom.benchmarks.libero.specs import SETTLING_ACTION
from mailroom.benchmarks.libero_plus.catalog import PlusEntry, load_plus_catalog
from mailroom.benchmarks.libero_plus.init_states import load_pruned_init
from mailroom.benchmarks.libero_plus.package_dir import plus_package_root
from mailroom.benchmarks.libero_plus.package_import import import_env_wrapper
from mailroom.orchestrator.families.registry import family_of_suite
from mailroom.orchestrator.packages.headless import simulator_chatter_to_stderr
from mailroom.orchestrator.sim.base import EpisodeStart
from mailroom.orchestrator.transport.png import decode_png

SUITE = "libero_plus_object"  # the one suite with offline tasks of all six categories
SEED = 20260907
DIAGNOSTIC = "agents/scripted_diagnostic/actor.py"


def first(category: str, base_task_index: int | None = None) -> PlusEntry:
    for entry in load_plus_catalog().suite_entries(SUITE, category):
        if base_task_index is None or entry.base_task_index == base_task_index:
            return entry
    raise AssertionError(f"no offline {category} task in {SUITE}")


@pytest.fixture(scope="module")
def adapter() -> Iterator[LiberoAdapter]:
    shared = LiberoAdapter(control_cap=40, proprio=True)
    yield shared
    shared.close()


def start(adapter: LiberoAdapter, suite: str, task_index: int) -> EpisodeStart:
    identity = family_of_suite(suite).resolve_task(suite, task_index, 0)
    return adapter.start_episode(identity, 0, SEED)


@pytest.fixture(scope="module")
def base_start(adapter: LiberoAdapter) -> EpisodeStart:
    """The standard LIBERO-Object task the chosen Plus tasks perturb."""
    base = first("camera").base_task_index
    assert base is not None
    started = start(adapter, "libero_object", base)
    BASE_FACTS["sim_state"] = adapter.sim_state()
    BASE_FACTS["agentview_pos"] = agentview_position(adapter)
    return started


BASE_FACTS: dict[str, np.ndarray[Any, Any]] = {}


def agentview_position(adapter: LiberoAdapter) -> np.ndarray[Any, Any]:
    model = adapter._env.env.sim.model
    return np.array(model.cam_pos[model.camera_name2id("agentview")])


def differs(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> float:
    return float(np.mean(np.any(a != b, axis=-1)))


def test_camera_changes_the_agentview_only(
    adapter: LiberoAdapter, base_start: EpisodeStart
) -> None:
    entry = first("camera", base_start.identity.task_index)
    assert entry.camera != [0, 0, 100, 0, 0]
    got = start(adapter, SUITE, entry.task_index)
    assert got.identity.instruction == base_start.identity.instruction
    assert got.state_sha256 == base_start.state_sha256
    assert differs(got.capture.images["agentview"], base_start.capture.images["agentview"]) > 0.2
    assert np.array_equal(
        got.capture.images["robot0_eye_in_hand"], base_start.capture.images["robot0_eye_in_hand"]
    )
    assert got.capture.joint_pos == base_start.capture.joint_pos


def test_robot_init_starts_from_the_perturbed_pose(
    adapter: LiberoAdapter, base_start: EpisodeStart
) -> None:
    entry = first("robot_init", base_start.identity.task_index)
    assert entry.robot_init > 0
    got = start(adapter, SUITE, entry.task_index)
    assert got.state_sha256 == base_start.state_sha256
    assert got.capture.joint_pos is not None and base_start.capture.joint_pos is not None
    perturbed = np.asarray(adapter._env.env.robots[0].init_qpos)
    # After ten settling controls the arm holds the pose the package defines...
    assert np.allclose(got.capture.joint_pos, perturbed, atol=2e-3)
    # ...which is not the base task's released pose.
    moved = np.abs(np.asarray(got.capture.joint_pos) - np.asarray(base_start.capture.joint_pos))
    assert moved.max() > 0.02
    assert (
        differs(
            got.capture.images["robot0_eye_in_hand"],
            base_start.capture.images["robot0_eye_in_hand"],
        )
        > 0.05
    )


def test_the_released_state_alone_erases_the_robot_init_perturbation() -> None:
    """Why the adapter re-applies it: the package's own reset then set_init_state puts
    the base task's joints back."""
    entry = first("robot_init")
    package = plus_package_root()
    states = load_pruned_init(package / entry.init_states_path)
    wrapper = import_env_wrapper()
    with simulator_chatter_to_stderr():
        env = wrapper.OffScreenRenderEnv(
            bddl_file_name=str(package / entry.env_bddl_name), camera_heights=64, camera_widths=64
        )
        try:
            env.seed(SEED)
            env.reset()
            robot = env.env.robots[0]
            after_reset = np.array(env.env.sim.data.qpos[robot._ref_joint_pos_indexes])
            assert np.allclose(after_reset, robot.init_qpos, atol=1e-6)
            env.set_init_state(states[0])
            joints = np.asarray(robot._ref_joint_pos_indexes)
            after_state = np.array(env.env.sim.data.qpos[joints])
        finally:
            env.close()
    base_joints = states[0][1 + joints]  # a flattened state is time, qpos, qvel
    assert np.allclose(after_state, base_joints)
    assert not np.allclose(after_state, robot.init_qpos, atol=1e-3)


def test_noise_changes_the_agentview_only_as_the_package_draws_it(
    adapter: LiberoAdapter, base_start: EpisodeStart
) -> None:
    entry = first("noise", base_start.identity.task_index)
    assert entry.noise > 0
    got = start(adapter, SUITE, entry.task_index)
    assert differs(got.capture.images["agentview"], base_start.capture.images["agentview"]) > 0.2
    assert np.array_equal(
        got.capture.images["robot0_eye_in_hand"], base_start.capture.images["robot0_eye_in_hand"]
    )
    again = start(adapter, SUITE, entry.task_index)  # same seed: the same noise draws
    assert np.array_equal(again.capture.images["agentview"], got.capture.images["agentview"])
    stepped = adapter.step(list(SETTLING_ACTION), observe=True)
    assert stepped.capture is not None  # each delivered frame gets fresh noise
    assert differs(stepped.capture.images["agentview"], got.capture.images["agentview"]) > 0.01


def test_language_changes_the_instruction_only(
    adapter: LiberoAdapter, base_start: EpisodeStart
) -> None:
    entry = first("language", base_start.identity.task_index)
    got = start(adapter, SUITE, entry.task_index)
    assert got.identity.instruction == entry.bddl_language == adapter._env.language_instruction
    assert got.identity.instruction != base_start.identity.instruction
    # The same physics, from the same state...
    assert np.array_equal(adapter.sim_state(), BASE_FACTS["sim_state"])
    assert np.array_equal(
        got.capture.images["robot0_eye_in_hand"], base_start.capture.images["robot0_eye_in_hand"]
    )
    # ...seen by the package's default agentview camera, which it places itself: within
    # a millimetre of LIBERO's, not bit for bit (so its images differ slightly).
    shift = np.abs(agentview_position(adapter) - BASE_FACTS["agentview_pos"])
    assert 0 < shift.max() < 1e-3


def test_the_fast_plan_runs_every_category_through_the_mailbox(
    tmp_path: Path, module_mailbox_root: Path, repo: Path
) -> None:
    plan = cli_plan(tmp_path / "plus.json", "fast", "--suite", SUITE)
    run_dir = tmp_path / "run"
    actor = f"/usr/bin/python3 {repo / DIAGNOSTIC} {{endpoint}} --chunks 2"
    launched = subprocess.run(
        launch_command(plan, run_dir, module_mailbox_root, actor, "--workers", "1"),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert launched.returncode == 0, launched.stderr[-3000:]
    cases = json.loads(plan.read_text())["cases"]
    categories = {load_plus_catalog().entry(SUITE, c["task_index"]).category for c in cases}
    assert categories == {"camera", "robot_init", "language", "noise", "layout", "background"}
    for case in cases:
        entry = load_plus_catalog().entry(SUITE, case["task_index"])
        (episode,) = run_dir.glob(f"episodes/{SUITE}-t{entry.task_index:03d}-*")
        result = json.loads((episode / "result.json").read_text())
        assert result["outcome"] in ("success", "failure")
        assert result["case"]["task_name"] == entry.task_name
        assert result["case"]["bddl_sha256"] == entry.bddl_sha256
        observation = json.loads((episode / "observations" / "obs-1.json").read_text())
        assert observation["instruction"] == entry.instruction
        image = decode_png((episode / "observations" / "obs-1-agentview.png").read_bytes())
        assert image.shape == (256, 256, 3)
    report = subprocess.run(
        [mailroom_exe(), "report", str(run_dir), "--json"], capture_output=True, text=True
    )
    assert report.returncode == 0, report.stderr
    document = json.loads(report.stdout)
    assert set(document["categories"]) == {f"{SUITE}/{c}" for c in categories}
    assert all(t["selected"] == 1 and t["completed"] == 1 for t in document["categories"].values())
    audit = subprocess.run([mailroom_exe(), "audit", str(run_dir)], capture_output=True, text=True)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    # Every category's episode re-executes to the same images, counters and outcome: a
    # noise frame's noise depends on the episode and the control alone, not on what was
    # recorded (every control, here); a robot-init arm is put back in the same pose.
    replayed = subprocess.run(
        [mailroom_exe(), "replay", str(run_dir), "--workers", "2", "--json"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert replayed.returncode == 0, replayed.stdout[-3000:] + replayed.stderr[-3000:]
    verdicts = json.loads(replayed.stdout)["verdicts"]
    assert len(verdicts) == len(cases) == 6
    replayed_categories = set()
    for verdict in verdicts:
        task = re.fullmatch(rf"{SUITE}-t(\d+)-.*", verdict["attempt_id"])
        assert task is not None, verdict["attempt_id"]
        category = load_plus_catalog().entry(SUITE, int(task.group(1))).category
        replayed_categories.add(category)
        assert verdict["verdict"] == "reproduced", (category, verdict)
        events = (run_dir / "episodes" / verdict["attempt_id"] / "events.jsonl").read_text()
        published = events.count('"observation_published"')
        assert verdict["checked_observations"] == published == 3, category  # 2 chunks, stop
    assert replayed_categories == categories
