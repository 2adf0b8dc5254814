"""Parked episodes deliver exactly the bytes of each episode alone, on the real simulator.

For one task of every family and suite (LIBERO-10, LIBERO-Spatial with the stove and
with the cabinet, LIBERO-Object, LIBERO-Goal with the articulated drawers and with the
stove, LIBERO-90, a LIBERO-PRO suite, each offline LIBERO-Plus category, LIBERO-Para),
two episodes (other released states, other seeds, other actions) start and run their
decisions interleaved on one task host (`sim.parked`): each is parked whenever the
other runs. Every control's outcome (native success, proprio, and for the tasks in
`FRAMES` both cameras' frames as `--record full` keeps them) and every delivered
observation must equal the same episode run alone, and after every control the model's
asset arrays must still equal the compiled model's (what parking does not carry).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mailroom.benchmarks.libero.adapter import LiberoAdapter
from mailroom.benchmarks.libero.parking import differing_fields, model_fields
from mailroom.benchmarks.libero.specs import LIBERO_OBSERVATION
from mailroom.benchmarks.libero_para.family import LIBERO_PARA
from mailroom.benchmarks.libero_plus.catalog import PLUS_CATEGORIES, load_plus_catalog
from mailroom.orchestrator.families.registry import family_of_suite
from mailroom.orchestrator.sim.base import Capture, ControlOutcome, TaskIdentity
from mailroom.orchestrator.sim.parked import ParkedEpisode, TaskHost
from para_copy import make_para_copy

CAMERAS = LIBERO_OBSERVATION.cameras


CONTROL_CAP = 60
DECISIONS = 3
CHUNK = 4
# (released state, seed) of the two episodes; a task with one released state (a
# LIBERO-Plus layout task) runs it twice, with the two seeds.
EPISODES = ((0, 20261203), (1, 7))


def episodes_of(identity: TaskIdentity) -> list[tuple[int, int]]:
    return [(min(state, identity.n_init_states - 1), seed) for state, seed in EPISODES]


PLUS_SUITE = "libero_plus_object"  # the one suite with offline tasks of all six categories


def plus_tasks() -> dict[str, tuple[str, int]]:
    """The first task of each category that runs offline (two have none)."""
    catalog = load_plus_catalog()
    found = {c: catalog.suite_entries(PLUS_SUITE, c) for c in PLUS_CATEGORIES}
    tasks = {c: (PLUS_SUITE, entries[0].task_index) for c, entries in found.items() if entries}
    assert len(tasks) == 6
    return tasks


TASKS: list[tuple[str, int]] = [
    ("libero_10", 0),
    ("libero_spatial", 7),  # the bowl on the stove
    ("libero_spatial", 4),  # the bowl in the cabinet's top drawer
    ("libero_object", 0),
    ("libero_goal", 0),  # open the middle drawer: articulated
    ("libero_goal", 7),  # turn on the stove: its flame is a model field
    ("libero_90", 0),
    ("libero_spatial_swap", 0),  # LIBERO-PRO
    *plus_tasks().values(),
    ("libero_para", 0),
]
# Tasks whose every control is rendered and compared, as `--record full` keeps them for
# video (the others compare each delivered observation): the flame is toggled a control
# late, drawers move between renders, noise is drawn per frame.
FRAMES = {
    ("libero_10", 0),
    ("libero_spatial", 7),
    ("libero_goal", 0),
    ("libero_goal", 7),
    plus_tasks()["noise"],
}


def action(episode: int, control: int) -> list[float]:
    """A different, valid 7-D action per episode and control: moves and grasps."""
    phase = control + 5 * episode
    return [
        0.5 * math.sin(0.4 * phase),
        0.5 * math.cos(0.3 * phase),
        -0.6 if control < 6 else 0.4,
        0.0,
        0.0,
        0.2 * math.sin(0.2 * phase) if episode else 0.0,
        1.0 if (control // 5) % 2 else -1.0,
    ]


Record = list[tuple[Any, ...]]


def capture_bytes(capture: Capture | None) -> tuple[Any, ...] | None:
    if capture is None:
        return None
    images = tuple(capture.images[c].tobytes() for c in CAMERAS)
    return (images, capture.joint_pos, capture.gripper_qpos)


def outcome_bytes(outcome: ControlOutcome) -> tuple[Any, ...]:
    frames = None
    if outcome.frames is not None:
        frames = tuple(outcome.frames[c].tobytes() for c in CAMERAS)
    return (outcome.success, outcome.state, frames, capture_bytes(outcome.capture))


def differences(got: Any, expected: Any, path: str = "") -> list[str]:
    """Where two records differ (their parts by index), for a readable failure."""
    if isinstance(got, tuple) and isinstance(expected, tuple) and len(got) == len(expected):
        found: list[str] = []
        for i, (a, b) in enumerate(zip(got, expected, strict=True)):
            found.extend(differences(a, b, f"{path}[{i}]"))
        return found
    return [] if got == expected else [path or "the record"]


def decide(simulator: Any, episode: int, decision: int, record: Record) -> None:
    for i in range(CHUNK):
        control = decision * CHUNK + i
        outcome = simulator.step(action(episode, control), observe=i == CHUNK - 1)
        record.append(outcome_bytes(outcome))


@pytest.fixture(scope="module")
def para_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    copy = tmp_path_factory.mktemp("para") / "LIBERO-Para"
    make_para_copy(copy, goal_tasks=(0,))
    LIBERO_PARA.declare_local_copy(copy)
    yield copy
    LIBERO_PARA.source.declare(None)


def identity_of(suite: str, task_index: int) -> TaskIdentity:
    return family_of_suite(suite).resolve_task(suite, task_index, 0)


def open_adapter() -> LiberoAdapter:
    adapter = LiberoAdapter(control_cap=CONTROL_CAP, proprio=True)
    return adapter


def asset_changes(simulator: Any) -> list[str]:
    assert isinstance(simulator, LiberoAdapter)
    scenes = simulator._scenes
    _, assets = model_fields()
    return differing_fields(simulator._env.env.sim.model._model, scenes.pristine, assets)


@pytest.mark.parametrize(("suite", "task_index"), TASKS, ids=[f"{s}-{t}" for s, t in TASKS])
def test_interleaved_parked_episodes_deliver_the_bytes_of_each_alone(
    suite: str, task_index: int, para_dir: Path
) -> None:
    identity = identity_of(suite, task_index)
    host = TaskHost(open_adapter)
    views: list[ParkedEpisode] = []
    parked: list[Record] = [[], []]
    try:
        for e, (state, seed) in enumerate(episodes_of(identity)):
            view = host.episode()
            view.set_control_cap(CONTROL_CAP)
            view.record_frames = (suite, task_index) in FRAMES
            start = view.start_episode(identity, state, seed)
            parked[e].append((start.success_during_settling, capture_bytes(start.capture)))
            views.append(view)
            decide(view, e, 0, parked[e])
        assert [v.holding for v in views] == ["parked", "parked"]
        assert host.simulators == 2
        for decision in range(1, DECISIONS):
            for e, view in enumerate(views):
                before = len(parked[e])
                decide(view, e, decision, parked[e])
                assert len(parked[e]) == before + CHUNK
                assert asset_changes(host.serving) == [], "parking would miss these arrays"
        # Each episode alone, on a simulator that ran nothing interleaved since its reset.
        alone = host.starter
        assert isinstance(alone, LiberoAdapter)
        alone.record_frames = (suite, task_index) in FRAMES
        for e, (state, seed) in enumerate(episodes_of(identity)):
            solo: Record = []
            start = alone.start_episode(identity, state, seed)
            solo.append((start.success_during_settling, capture_bytes(start.capture)))
            for decision in range(DECISIONS):
                decide(alone, e, decision, solo)
            assert len(solo) == len(parked[e]) == 1 + DECISIONS * CHUNK
            for i, (got, expected) in enumerate(zip(parked[e], solo, strict=True)):
                assert got == expected, (
                    f"episode {e} of {suite} {task_index}, record {i}: {differences(got, expected)}"
                )
        # The two episodes did differ: the comparison could fail.
        assert parked[0][-1] != parked[1][-1]
    finally:
        for view in views:
            view.end(broken=False)
        host.close_idle()


def test_a_parked_episode_is_small() -> None:
    """A parked LIBERO episode is a few kilobytes of arrays (mj state, model fields the
    episode changed, controller values)."""
    host = TaskHost(open_adapter)
    try:
        view = host.episode()
        view.set_control_cap(CONTROL_CAP)
        view.start_episode(identity_of("libero_spatial", 7), 0, 1)
        serving = host.serving
        assert isinstance(serving, LiberoAdapter)
        parked = serving.park()
        assert 2_000 < parked.nbytes < 16_000
        # The fixtures the reset placed and the stove's flame sites are model fields,
        # parked with the episode.
        assert {"body_pos", "body_quat", "site_rgba"} <= set(parked.model_delta)
        model = serving._env.env.sim.model
        assert np.array_equal(parked.model_delta["body_pos"], model.body_pos)
        # A flame toggled the way LIBERO toggles it (its alpha flipped) goes with its
        # episode: another episode's start does not see it, and it comes back with it.
        flame = int(np.flatnonzero(parked.model_delta["site_rgba"][:, 3] == 0)[0])
        model.site_rgba[flame, 3] = 1.0
        lit = serving.park()
        other = host.episode()
        other.set_control_cap(CONTROL_CAP)
        other.start_episode(identity_of("libero_spatial", 7), 1, 2)
        other.step([0.0] * 6 + [-1.0], observe=False)  # the other runs on `serving` now
        assert serving._env.env.sim.model.site_rgba[flame, 3] == 0.0
        serving.unpark(lit)
        assert serving._env.env.sim.model.site_rgba[flame, 3] == 1.0
        other.end(broken=False)
        view.end(broken=False)
    finally:
        host.close_idle()
