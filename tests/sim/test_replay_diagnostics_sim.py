"""Post-episode diagnostics on the real simulator: in a forced-success episode, every
goal predicate of the task holds at the native success's control, and the diagnostics
say so, apart from the result and labelled never a score."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from campaign_builders import diagnostic_actor, launch_config
from mailroom.benchmarks.libero.adapter import LiberoAdapter
from mailroom.orchestrator.campaign.coordinator import Work, run_work
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.replay.diagnostics import (
    GoalTracker,
    read_diagnostics,
    write_diagnostics,
)
from mailroom.orchestrator.replay.recorded import read_recorded
from mailroom.orchestrator.replay.replayer import replay
from mailroom.orchestrator.sim.base import ControlOutcome, TaskIdentity

# LIBERO-Goal task 8, "put the bowl on the plate": its goal is (On akita_black_bowl_1 plate_1).
CASE = Case(suite="libero_goal", task_index=8, init_state_index=0, seed=7)
FORCED_AFTER = 7


class ForcingAdapter(LiberoAdapter):
    """The real adapter; after the episode's 7th control the bowl is set down above the
    plate (the simulator's own physics then settles it there)."""

    def start_episode(self, identity: TaskIdentity, init_state_index: int, seed: int) -> Any:
        self._controls = 0
        return super().start_episode(identity, init_state_index, seed)

    def step(self, action: Any, *, observe: bool) -> ControlOutcome:
        outcome = super().step(action, observe=observe)
        self._controls += 1
        if self._controls == FORCED_AFTER:
            env = self._env.env
            sim = env.sim
            bowl, plate = env.objects_dict["akita_black_bowl_1"], env.objects_dict["plate_1"]
            start, end = sim.model.get_joint_qpos_addr(bowl.joints[-1])
            above = sim.data.body_xpos[sim.model.body_name2id(plate.root_body)] + [0, 0, 0.05]
            qpos = np.array(sim.data.qpos[start:end])
            qpos[:3] = above
            sim.data.qpos[start:end] = qpos
            sim.forward()
        return outcome


def open_forcing(*, control_cap: int, proprio: bool) -> ForcingAdapter:
    return ForcingAdapter(control_cap=control_cap, proprio=proprio)


def test_a_forced_success_has_every_goal_predicate_holding_at_its_control(
    tmp_path: Path, module_mailbox_root: Path
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    config = launch_config(
        run_dir,
        module_mailbox_root,
        actor=diagnostic_actor("--chunks", "4"),
        settings=RunSettings(max_policy_calls=6, replan_interval=5, response_timeout_s=120.0),
        simulator=open_forcing,
    )
    outcome = run_work(config, [Work(CASE, 1)], 1, lambda *_: None)
    assert outcome.lost == []
    attempt = run_dir / "episodes" / CASE.attempt_id(1)
    result = json.loads((attempt / "result.json").read_text())
    assert (result["outcome"], result["termination"]) == ("success", "native_success")
    success_at = result["counters"]["first_success_control"]
    assert success_at > FORCED_AFTER

    adapter = ForcingAdapter(control_cap=result["settings"]["control_cap"], proprio=False)
    try:
        goals = GoalTracker()
        verdict = replay(adapter, read_recorded(attempt), goals)
    finally:
        adapter.close()
    assert verdict.verdict == "reproduced", verdict
    write_diagnostics(attempt, goals.diagnostics(verdict.attempt_id, "reproduced"))
    diagnostics = read_diagnostics(attempt)
    assert diagnostics is not None and diagnostics.label.endswith("never a score")
    assert [p.predicate for p in diagnostics.predicates] == ["on akita_black_bowl_1 plate_1"]
    for predicate in diagnostics.predicates:
        # It held from the success's control on (not before the bowl was moved), and at
        # the end: the episode ended at that control.
        assert predicate.first_held_control is not None
        assert FORCED_AFTER < predicate.first_held_control <= success_at
        assert predicate.held_at_end
    assert diagnostics.controls_evaluated == success_at
    # Apart from the result: the result document is untouched by the diagnostics.
    assert json.loads((attempt / "result.json").read_text()) == result
