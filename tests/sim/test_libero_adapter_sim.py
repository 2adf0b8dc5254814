"""The LIBERO adapter against a plain LIBERO loop written here, on the real simulator.

A plain loop (fresh env, cameras rendered at every control, seed / reset / released
state / settle / step) is the reference. The adapter (reused env, cameras rendered only
for delivered observations) must give identical images and identical state.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from mailroom.benchmarks.libero.adapter import LiberoAdapter, resolve_task
from mailroom.benchmarks.libero.specs import LIBERO_OBSERVATION, SETTLING_ACTION
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.episode.blinded import run_blinded_episode
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.packages.headless import simulator_chatter_to_stderr
from mailroom.orchestrator.results.steps_file import read_steps
from mailroom.orchestrator.sim.base import Capture, TaskIdentity
from mailroom.orchestrator.transport.png import decode_png
from thread_actor import ThreadActor, act, thread_launcher

CAMERAS = LIBERO_OBSERVATION.cameras
SETTLING_CONTROLS = LIBERO_OBSERVATION.settling_controls


# A scene whose fixtures the seed moves (about a centimetre), after its XML is compiled.
SUITE, TASK, SEED, K = "libero_spatial", 0, 20260907, 5
OTHER_SEED = 7
rng = np.random.default_rng(7)
ACTIONS: list[list[float]] = [
    [*rng.uniform(-0.6, 0.6, size=6).round(3).tolist(), -1.0 if i < 10 else 1.0] for i in range(20)
]


@dataclass
class PlainRun:
    delivered: list[dict[str, npt.NDArray[np.uint8]]]
    joint_pos: list[npt.NDArray[np.float64]]
    final_state: npt.NDArray[np.float64]


def plain_libero_loop(identity: TaskIdentity, init_state: int, seed: int = SEED) -> PlainRun:
    """What a common LIBERO evaluator does, with the protocol's camera transform."""
    with simulator_chatter_to_stderr():
        from libero.libero import benchmark
        from libero.libero.envs import OffScreenRenderEnv

        states = benchmark.get_benchmark_dict()[SUITE]().get_task_init_states(TASK)
        env = OffScreenRenderEnv(
            bddl_file_name=str(identity.bddl_path), camera_heights=256, camera_widths=256
        )
        try:
            env.seed(seed)
            env.reset()
            env.set_init_state(states[init_state])
            for _ in range(SETTLING_CONTROLS):
                obs, *_ = env.step(np.array(SETTLING_ACTION))
            delivered, joints = [_images(obs)], [np.asarray(obs["robot0_joint_pos"])]
            for i, action in enumerate(ACTIONS):
                obs, *_ = env.step(np.array(action))
                if (i + 1) % K == 0:
                    delivered.append(_images(obs))
                    joints.append(np.asarray(obs["robot0_joint_pos"]))
            final = np.asarray(env.get_sim_state(), dtype=np.float64).copy()
        finally:
            env.close()
    return PlainRun(delivered, joints, final)


def _images(obs: dict[str, Any]) -> dict[str, npt.NDArray[np.uint8]]:
    return {c: np.ascontiguousarray(obs[f"{c}_image"][::-1, ::-1]) for c in CAMERAS}


def adapter_run(
    adapter: LiberoAdapter, identity: TaskIdentity, init_state: int, seed: int = SEED
) -> list[Capture]:
    start = adapter.start_episode(identity, init_state, seed)
    captures = [start.capture]
    for i, action in enumerate(ACTIONS):
        outcome = adapter.step(action, observe=(i + 1) % K == 0)
        assert not outcome.success
        if outcome.capture is not None:
            captures.append(outcome.capture)
    return captures


@pytest.fixture(scope="module")
def identity() -> TaskIdentity:
    return resolve_task(SUITE, TASK)


@pytest.fixture(scope="module")
def adapter() -> Iterator[LiberoAdapter]:
    shared = LiberoAdapter(control_cap=100, proprio=True)
    yield shared
    shared.close()


@pytest.fixture(scope="module")
def reference(identity: TaskIdentity) -> PlainRun:
    return plain_libero_loop(identity, init_state=1)


def test_reused_gated_adapter_matches_a_fresh_plain_loop(
    adapter: LiberoAdapter, identity: TaskIdentity, reference: PlainRun
) -> None:
    adapter_run(adapter, identity, init_state=0)  # dirty the env with another episode
    builds, compilations = adapter.envs_built, adapter.scene_compilations
    contexts = adapter.render_contexts_reused
    captures = adapter_run(adapter, identity, init_state=1)
    assert adapter.envs_built == builds  # the env was reused, not rebuilt
    # ... and its reset simulated a copy of the scene compiled for the episode before,
    # rendered through the render context built for that episode
    assert compilations == 1 and adapter.scene_compilations == compilations
    assert adapter.render_contexts_reused == contexts + 1
    assert_same_run(adapter, captures, reference)


def assert_same_run(adapter: LiberoAdapter, captures: list[Capture], reference: PlainRun) -> None:
    assert len(captures) == len(reference.delivered) == 1 + len(ACTIONS) // K
    for capture, expected in zip(captures, reference.delivered, strict=True):
        for camera in CAMERAS:
            image = capture.images[camera]
            assert image.dtype == np.uint8 and image.shape == (256, 256, 3)
            assert image.flags["C_CONTIGUOUS"]
            assert np.array_equal(image, expected[camera])
    assert np.array_equal(adapter.sim_state(), reference.final_state)


def test_another_seed_on_the_reused_scene_matches_a_fresh_plain_loop(
    adapter: LiberoAdapter, identity: TaskIdentity, reference: PlainRun
) -> None:
    """The seed places fixtures after the scene is compiled: the same compiled scene
    and render context serve every seed, and the placement still comes through."""
    adapter_run(adapter, identity, init_state=0)  # the scene is compiled, whatever ran first
    compilations, contexts = adapter.scene_compilations, adapter.render_contexts_reused
    captures = adapter_run(adapter, identity, init_state=1, seed=OTHER_SEED)
    assert adapter.scene_compilations == compilations
    assert adapter.render_contexts_reused == contexts + 1
    first = captures[0].images["agentview"]
    assert not np.array_equal(first, reference.delivered[0]["agentview"])  # seed shows
    assert_same_run(adapter, captures, plain_libero_loop(identity, 1, seed=OTHER_SEED))


def test_cameras_render_only_for_delivered_observations(
    adapter: LiberoAdapter, identity: TaskIdentity
) -> None:
    before = adapter.camera_renders
    adapter.start_episode(identity, 0, SEED)
    # reset, the released state and settling render only the first delivered frame
    assert adapter.camera_renders - before == len(CAMERAS)
    before = adapter.camera_renders
    for i in range(K):
        adapter.step(ACTIONS[i], observe=i == K - 1)
    assert adapter.camera_renders - before == len(CAMERAS)  # one frame per camera, not K


def test_proprio_track_gives_seven_arm_and_two_gripper_encoders(
    adapter: LiberoAdapter, identity: TaskIdentity, reference: PlainRun
) -> None:
    captures = adapter_run(adapter, identity, init_state=1)
    for capture, joints in zip(captures, reference.joint_pos, strict=True):
        assert capture.joint_pos is not None and capture.gripper_qpos is not None
        assert len(capture.joint_pos) == 7 and len(capture.gripper_qpos) == 2
        assert np.array_equal(np.array(capture.joint_pos), joints)


def test_identity_hashes_are_content_hashes(identity: TaskIdentity) -> None:
    import hashlib

    assert identity.bddl_sha256 == hashlib.sha256(identity.bddl_path.read_bytes()).hexdigest()
    assert identity.init_states_path.suffix == ".npz"
    data = identity.init_states_path.read_bytes()
    assert identity.init_states_sha256 == hashlib.sha256(data).hexdigest()
    assert identity.n_init_states == 50


@pytest.mark.parametrize("suite", ["libero_goal_lan", "libero_spatial_task"])
def test_pro_instruction_is_the_envs_own_not_the_base_tasks(suite: str) -> None:
    with simulator_chatter_to_stderr():
        from libero.libero import benchmark
        from libero.libero.envs import OffScreenRenderEnv

        bench = benchmark.get_benchmark_dict()[suite]()
        identity = resolve_task(suite, 0)
        env = OffScreenRenderEnv(
            bddl_file_name=str(identity.bddl_path), camera_heights=64, camera_widths=64
        )
        try:
            assert identity.instruction == env.language_instruction
        finally:
            env.close()
    assert identity.benchmark == "libero_pro"
    assert identity.instruction != bench.get_task(0).language


def test_proprio_reaches_the_actor_and_the_step_rows_through_the_real_runner(
    adapter: LiberoAdapter, identity: TaskIdentity, reference: PlainRun, tmp_path: Path
) -> None:
    """Through the real runner and mailbox, with the proprioception track on: each
    observation's PNGs decode to the plain loop's frames and its encoders are the plain
    loop's (7 arm, 2 gripper); each step row holds the encoders after its control."""
    settings = RunSettings(max_policy_calls=3, replan_interval=K, proprio=True)
    adapter.set_control_cap(settings.control_cap(220))
    actors: list[ThreadActor] = []
    case = Case(suite=SUITE, task_index=TASK, init_state_index=1, seed=SEED)

    def script(observation: dict[str, Any]) -> dict[str, Any]:
        n = observation["sequence"]
        return act(observation, ACTIONS[(n - 1) * K : n * K])

    result = run_blinded_episode(
        case,
        attempt=1,
        settings=settings,
        adapter=adapter,
        run_dir=tmp_path / "run",
        mailbox_root=tmp_path / "mb",
        launch_actor=thread_launcher(script, actors),
        record="minimal",
    )
    assert result.settings.proprio and result.counters.executed_controls == 3 * K
    observations = actors[0].observations
    assert len(observations) == 3
    outbox = next((tmp_path / "mb").iterdir()) / "outbox"
    for n, observation in enumerate(observations):
        for camera in CAMERAS:
            png = (outbox / f"obs-{n + 1}-{camera}.png").read_bytes()
            assert np.array_equal(decode_png(png), reference.delivered[n][camera])
        proprio = observation["proprio"]
        assert len(proprio["joint_pos"]) == 7 and len(proprio["gripper_qpos"]) == 2
        assert np.allclose(proprio["joint_pos"], reference.joint_pos[n], atol=1e-9)
    steps = tmp_path / "run" / "episodes" / result.attempt_id / "steps.jsonl"
    rows = read_steps(steps, proprio=True, dimension=7)
    assert rows.state is not None and rows.state.shape == (3 * K, 9)
    # The observation after chunk n shows the encoders after that chunk's last control.
    for n, observation in enumerate(observations[1:], start=1):
        delivered = [*observation["proprio"]["joint_pos"], *observation["proprio"]["gripper_qpos"]]
        assert np.allclose(rows.state[n * K - 1], delivered, atol=1e-6)
    assert not np.allclose(rows.state[0], rows.state[-1])  # the arm moved
