"""A worker with several live episodes: real endpoints watched by the real loop, real
sandboxed actors, the campaign's own path; the simulator is the simulator-free fake
(these tests are about serving, timing and isolation, not physics).

The same on the real simulator, byte for byte against solo runs: test_slots_sim.py.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from campaign_builders import campaign_request, diagnostic_actor
from conftest import actor_started_events, kill_sandbox_user, sandbox_processes_left
from mailroom.orchestrator.campaign.coordinator import WorkOutcome
from mailroom.orchestrator.campaign.launch import run_campaign
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.families.plans import build_plan
from mailroom.orchestrator.sim.base import (
    ControlOutcome,
    EpisodeStart,
    SimulatorError,
    TaskIdentity,
)
from mailroom.orchestrator.sim.fake import FakeSimulator
from recorded_events import episode_events, live_events

TASKS = [0, 1, 2]


class FailingSimulator(FakeSimulator):
    """Task 1's simulator raises a typed simulator error at its 3rd control; task 2's
    start fails with an error nobody typed (a bug); task 0 runs normally."""

    def start_episode(
        self, identity: TaskIdentity, init_state_index: int, seed: int
    ) -> EpisodeStart:
        self.task_index = identity.task_index
        if identity.task_index == 2:
            raise RuntimeError("an untyped failure while starting")
        return super().start_episode(identity, init_state_index, seed)

    def step(self, action: Sequence[float], *, observe: bool) -> ControlOutcome:
        outcome = super().step(action, observe=observe)
        if self.task_index == 1 and self._controls == 3:
            raise SimulatorError("the physics diverged")
        return outcome


# An answer that waited this long behind another episode's serving shows queueing.
QUEUED_MS = 200


def _live_together(run_dir: Path, episodes: int) -> bool:
    """Whether the run's records show `episodes` episodes published (none can have ended
    before: only this makes them succeed) and an answer that waited QUEUED_MS or more
    while another was served."""
    published = 0
    queued = False
    for log in run_dir.glob("episodes/*/events.jsonl"):
        events = live_events(log)  # the log is being written: its whole lines
        published += any(e["event"] == "observation_published" for e in events)
        queued |= any(
            e["event"] == "decision_served" and e["queue_delay_ms"] >= QUEUED_MS for e in events
        )
    return published == episodes and queued


class LiveTogetherSimulator(FakeSimulator):
    """Succeeds natively only once the run's records show every episode live at once and
    an answer queued behind another (`_live_together`), so no episode ends before that
    however slow the machine is; the decision budget bounds the wait (never seeing it,
    every episode ends a failure and the test fails)."""

    def __init__(self, *args: Any, run_dir: Path, episodes: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._run_dir, self._episodes = run_dir, episodes

    def step(self, action: Sequence[float], *, observe: bool) -> ControlOutcome:
        outcome = super().step(action, observe=observe)
        if outcome.success or not _live_together(self._run_dir, self._episodes):
            return outcome
        return dataclasses.replace(outcome, success=True)


def _launch(
    run_dir: Path,
    mailbox_root: Path,
    *,
    slots: int,
    simulator: Any,
    think_s: float = 0.0,
    max_policy_calls: int = 4,
    chunks: int = 3,
) -> WorkOutcome:
    run_dir.mkdir(mode=0o700)
    request = campaign_request(
        run_dir,
        mailbox_root,
        plan=build_plan("task_coverage", suite="libero_10", task_ids=TASKS),
        actor=diagnostic_actor("--chunks", str(chunks), "--think", str(think_s)),
        settings=RunSettings(
            max_policy_calls=max_policy_calls, replan_interval=5, response_timeout_s=60.0
        ),
        simulator=simulator,
        slots=slots,
    )
    return run_campaign(request, lambda *_: None, lambda _: None)


def _results(run_dir: Path) -> dict[str, dict[str, Any]]:
    return {
        p.parent.name: json.loads(p.read_text())
        for p in sorted(run_dir.glob("episodes/*/result.json"))
    }


def test_live_episodes_overlap_and_a_wait_behind_another_is_queueing_delay(
    tmp_path: Path, mailbox_root: Path
) -> None:
    # Instant actors that never stop, a simulator that holds the worker 0.1 s per control
    # (0.5 s per decision): while one response is served, the others' wait in the queue.
    # Starts are staggered (one starter thread); each episode ends by native success once
    # the records show all three live and an answer queued (LiveTogetherSimulator), within
    # a budget of 40 decisions each.
    run_dir = tmp_path / "run"
    simulator = functools.partial(
        LiveTogetherSimulator, step_s=0.1, run_dir=run_dir, episodes=len(TASKS)
    )
    outcome = _launch(
        run_dir, mailbox_root, slots=3, simulator=simulator, max_policy_calls=40, chunks=40
    )
    assert outcome.lost == [] and outcome.unrecorded == []
    results = _results(run_dir)
    assert len(results) == 3
    starts, ends = [], []
    for attempt_id, result in results.items():
        assert result["schema"] == "mailroom.episode_result/v8"
        assert result["instructions_version"] == "v2"  # what the profile declares
        # Ended by the success that needs the three live at once, not by the budget.
        assert (result["outcome"], result["termination"]) == ("success", "native_success")
        calls = result["counters"]["policy_calls"]
        assert 1 <= calls < 40
        events = episode_events(run_dir, attempt_id)
        served = [e for e in events if e["event"] == "decision_served"]
        # One timing record per policy call; the result's totals are their sums.
        assert [e["sequence"] for e in served] == list(range(1, calls + 1))
        assert result["queue_delay"]["samples"] == calls
        total = sum(e["queue_delay_ms"] for e in served)
        assert abs(result["queue_delay"]["total_ms"] - total) < 0.01 * calls
        # Every decision followed by an observation has a processing time: the
        # simulator's 0.5 s is in it, not in the actor's latency or the queue.
        processing = [e["processing_ms"] for e in served]
        assert processing[-1] is None and all(p >= 450 for p in processing[:-1])
        assert result["processing"]["samples"] == calls - 1
        starts.append(min(e["t"] for e in events if e["event"] == "observation_published"))
        ends.append(max(e["t"] for e in events if e["event"] == "episode_finished"))
    # Live at once: every episode had published before any of them finished.
    assert max(starts) < min(ends)
    delays = [r["queue_delay"]["max_ms"] for r in results.values()]
    assert max(delays) >= QUEUED_MS, delays  # an answer waited while another was served
    assert sandbox_processes_left(run_dir) == []


def test_a_failure_in_one_live_episode_ends_that_episode_only(
    tmp_path: Path, mailbox_root: Path
) -> None:
    run_dir = tmp_path / "run"
    outcome = _launch(
        run_dir,
        mailbox_root,
        slots=3,
        simulator=functools.partial(FailingSimulator, step_s=0.02),
        think_s=0.3,
    )
    assert outcome.unrecorded == []
    results = _results(run_dir)
    by_task = {r["case"]["task_index"]: r for r in results.values()}
    assert by_task[0]["outcome"] == "failure" and by_task[0]["errors"] == []
    typed = by_task[1]
    assert (typed["outcome"], typed["termination"]) == ("error", "infrastructure_error")
    assert typed["errors"][0]["code"] == "simulator_exception"
    # The untyped failure is reported as lost and recorded, never silently dropped.
    [(case_id, attempt, reason)] = outcome.lost
    assert "RuntimeError" in reason
    assert by_task[2]["attempt_id"] == f"{case_id}-a{attempt}"
    assert by_task[2]["outcome"] == "error"
    assert by_task[2]["errors"][0]["code"] == "worker_lost"
    assert sandbox_processes_left(run_dir) == []


def test_an_actor_killed_mid_run_fails_its_episode_and_the_others_go_on(
    tmp_path: Path, mailbox_root: Path
) -> None:
    run_dir = tmp_path / "run"
    outcomes: list[WorkOutcome] = []
    launch = threading.Thread(
        target=lambda: outcomes.append(
            _launch(run_dir, mailbox_root, slots=3, simulator=FakeSimulator, think_s=1.0)
        )
    )
    launch.start()
    deadline = time.monotonic() + 60
    while len(actor_started_events(run_dir)) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    started = actor_started_events(run_dir)
    assert len(started) == 3
    victim = started[1]["confinement"]["outer_uid"]
    kill_sandbox_user(victim)
    launch.join(timeout=120)
    assert not launch.is_alive() and outcomes[0].lost == []
    results = _results(run_dir)
    failed = [r for r in results.values() if r["outcome"] == "error"]
    assert len(failed) == 1 and failed[0]["errors"][0]["code"] == "actor_exited"
    others = [r for r in results.values() if r["outcome"] != "error"]
    assert len(others) == 2 and all(r["termination"] == "actor_stop" for r in others)
    assert sandbox_processes_left(run_dir) == []


def test_more_workers_than_tasks_split_the_largest_groups() -> None:
    from mailroom.orchestrator.campaign.coordinator import Work, group_by_task
    from mailroom.orchestrator.catalog.cases import Case

    work = [
        Work(Case(suite="libero_10", task_index=t, init_state_index=s, seed=7), 1)
        for t, states in ((0, 6), (1, 2))
        for s in range(states)
    ]
    assert [len(g) for g in group_by_task(work)] == [6, 2]
    split = group_by_task(work, at_least=4)
    assert [len(g) for g in split] == [2, 2, 2, 2]
    # Plan order within a task is kept, and nothing is lost or repeated.
    assert [w for g in split for w in g] == work
    assert len(group_by_task(work, at_least=20)) == 8  # one episode each, no further
