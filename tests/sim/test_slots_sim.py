"""Live episodes on the real simulator.

- Same bytes: four episodes of two tasks live at once in one worker, parked on their
  task's serving simulator, deliver exactly the images, states and outcomes that each
  delivers alone on a simulator of its own.
- Three released states of one task (`plan --init-states`) run parked at once, and the
  run replays `reproduced`.
- `mailroom launch --slots 4` runs the development plan with four live at once; an actor
  killed mid-run fails its episode only.
- A launch killed with several live episodes records each as interrupted, and
  `resume` completes the run without re-running them.

Episodes are held live at once by an event, not by a guess at how fast simulators
build: each actor waits at a gate (tests/support/actors/gated_actor.py) that the test opens
once every episode it needs has published its first observation.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
from conftest import (
    actor_started_events,
    cli_plan,
    copied_actor,
    kill_sandbox_user,
    launch_command,
    mailroom_exe,
    sandbox_processes_left,
)
from mailroom.benchmarks.libero.adapter import LiberoAdapter
from mailroom.orchestrator.actors.confinement import ConfinementSettings
from mailroom.orchestrator.actors.launcher import profile_launcher
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.actors.profiles import profile_dir
from mailroom.orchestrator.campaign.coordinator import LaunchConfig, Work, run_work
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.sim.base import ControlOutcome, SimulatorError, TaskIdentity
from mailroom.orchestrator.sim.parked import Holding
from recorded_events import attempt_events

PROFILE = "scripted_diagnostic"
ACTOR = str(profile_dir(PROFILE) / "actor.py")
CASES = [
    Case(suite=suite, task_index=0, init_state_index=state, seed=20260907)
    for suite in ("libero_spatial", "libero_goal")
    for state in (0, 1)
]


# A case whose simulator breaks in its third decision, while the others are live.
BREAKING = Case(suite="libero_object", task_index=0, init_state_index=0, seed=20260907)


class BreakingAdapter(LiberoAdapter):
    """The real adapter; `BREAKING`'s task raises a simulator error at its 12th control
    (a control without a render, in its third decision: other episodes have rendered on
    this thread since its own last render)."""

    def start_episode(self, identity: TaskIdentity, init_state_index: int, seed: int) -> Any:
        self._breaks = identity.suite == BREAKING.suite
        self._controls = 0
        return super().start_episode(identity, init_state_index, seed)

    def step(self, action: Any, *, observe: bool) -> ControlOutcome:
        outcome = super().step(action, observe=observe)
        self._controls += 1
        if self._breaks and self._controls == 12:
            raise SimulatorError("the physics diverged (injected)")
        return outcome


def open_breaking(*, control_cap: int, proprio: bool) -> BreakingAdapter:
    return BreakingAdapter(control_cap=control_cap, proprio=proprio)


class Gate:
    """Opens the gate of every gated actor under `mailbox`, and of each endpoint made
    there later, once `first_observations` attempts of `run_dir` have published their
    first observation (`opened_by_event`), or when `open()` is called. After
    OPEN_ANYWAY_S it opens regardless, so a run never hangs: the test then fails on
    what it checks."""

    OPEN_ANYWAY_S = 300.0

    def __init__(self, run_dir: Path, mailbox: Path, first_observations: int | None = None):
        self.run_dir, self.mailbox, self.wanted = run_dir, mailbox, first_observations
        self.opened_by_event = False
        self._open, self._stop = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> Gate:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def open(self) -> None:
        self._open.set()

    def _first_observations(self) -> int:
        count = 0
        for log in self.run_dir.glob("episodes/*/events.jsonl"):
            for line in log.read_text().splitlines():
                with contextlib.suppress(ValueError):  # a line being written
                    event = json.loads(line)
                    count += event["event"] == "observation_published" and event["sequence"] == 1
        return count

    def _serve(self) -> None:
        give_up = time.monotonic() + self.OPEN_ANYWAY_S
        while not self._stop.is_set():
            if not self._open.is_set():
                if self.wanted is not None and self._first_observations() >= self.wanted:
                    self.opened_by_event = True
                    self._open.set()
                elif time.monotonic() > give_up:
                    self._open.set()
            if self._open.is_set():
                for inbox in self.mailbox.glob("*/inbox"):
                    with contextlib.suppress(OSError):  # an endpoint being removed
                        (inbox / "gate").touch(exist_ok=True)
            self._stop.wait(0.1)


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copied_actor(tmp_path_factory.mktemp("actors"), "gated_actor.py")


def _run(
    run_dir: Path,
    mailbox_root: Path,
    *,
    slots: int,
    think_s: float,
    cases: list[Case] = CASES,
    simulator: Any = None,
    gated: Path | None = None,
    holding: Holding = "parked",
) -> None:
    """The cases in one worker; with `gated`, each actor waits at its gate first."""
    declaration = json.loads((profile_dir(PROFILE) / "profile.json").read_text("utf-8"))
    limits = ActorLimits.model_validate(declaration["limits"])
    confinement = ConfinementSettings(mode="sandbox")
    actor = ["{python}", ACTOR, "{endpoint}", "--chunks", "3", "--think", str(think_s)]
    if gated is not None:  # gated_actor.py ENDPOINT PROGRAM ARG...
        actor = ["{python}", str(gated), "{endpoint}", ACTOR, *actor[3:]]
    run_dir.mkdir(mode=0o700)
    config = LaunchConfig(
        run_dir=run_dir,
        mailbox_root=mailbox_root,
        # Generous: a gated actor's first answer waits for the other episodes' builds.
        settings=RunSettings(
            max_policy_calls=4, replan_interval=5, response_timeout_s=600.0, proprio=True
        ),
        record="minimal",
        launcher=profile_launcher(
            actor,
            profile=PROFILE,
            confinement=confinement,
            limits=limits,
            run_dir=run_dir,
            mailbox_root=mailbox_root,
        ),
        limits=limits,
        slots=slots,
        holding=holding,
        simulator=simulator,
    )
    outcome = run_work(config, [Work(case, 1) for case in cases], 1, lambda *_: None)
    assert outcome.lost == [] and outcome.unrecorded == []
    assert sandbox_processes_left(run_dir) == []


def _delivered(run_dir: Path, case: Case) -> dict[str, Any]:
    """What the episode showed and did, without times and random tokens."""
    episode = run_dir / "episodes" / case.attempt_id(1)
    result = json.loads((episode / "result.json").read_text())
    events = attempt_events(episode)
    return {
        "images": [e["image_sha256"] for e in events if e["event"] == "observation_published"],
        "steps": (episode / "steps.jsonl").read_text(),
        "outcome": (result["outcome"], result["termination"], result["truncation"]),
        "counters": result["counters"],
        "state": result["case"]["state_sha256"],
    }


@pytest.fixture(scope="module")
def solo(tmp_path_factory: pytest.TempPathFactory, module_mailbox_root: Path) -> Path:
    """Each of CASES alone, one after the other, in one worker, each on a simulator of
    its own."""
    run_dir = tmp_path_factory.mktemp("solo") / "run"
    _run(run_dir, module_mailbox_root, slots=1, think_s=0.0, holding="dedicated")
    assert {_holding(run_dir, case) for case in CASES} == {"dedicated"}
    return run_dir


def _holding(run_dir: Path, case: Case) -> str:
    result = json.loads((run_dir / "episodes" / case.attempt_id(1) / "result.json").read_text())
    holding: str = result["simulator"]
    return holding


def _first_and_end(run_dir: Path, case: Case) -> tuple[float, float]:
    events = attempt_events(run_dir / "episodes" / case.attempt_id(1))
    first = min(e["t"] for e in events if e["event"] == "observation_published")
    return float(first), float(max(e["t"] for e in events if e["event"] == "episode_finished"))


def _all_live_at_once(run_dir: Path, cases: list[Case]) -> bool:
    spans = [_first_and_end(run_dir, case) for case in cases]
    return max(f for f, _ in spans) < min(e for _, e in spans)


def test_four_live_episodes_of_two_tasks_deliver_the_bytes_of_solo_runs(
    solo: Path, tmp_path: Path, module_mailbox_root: Path, gated: Path
) -> None:
    together, mailbox = tmp_path / "together", module_mailbox_root / "together"
    with Gate(together, mailbox, first_observations=len(CASES)) as gate:
        _run(together, mailbox, slots=4, think_s=0.0, gated=gated)
    assert gate.opened_by_event, "the four episodes did not all publish a first observation"
    assert _all_live_at_once(together, CASES), "the four episodes were not live at once"
    for case in CASES:
        alone, among = _delivered(solo, case), _delivered(together, case)
        assert len(alone["images"]) == 4 and alone["steps"]
        assert among == alone, case.case_id
        # Two episodes of each task shared its serving simulator, parked in turn.
        assert _holding(together, case) == "parked", case.case_id
    # Each delivered image is a real render: the two initial states differ.
    first = [_delivered(solo, c)["images"][0] for c in CASES]
    assert len({json.dumps(x, sort_keys=True) for x in first}) == 4


def test_a_simulator_that_breaks_among_live_ones_leaves_their_bytes_alone(
    solo: Path, tmp_path: Path, module_mailbox_root: Path, gated: Path
) -> None:
    # The broken simulator is closed while four others are live on the same thread:
    # closing it must free its own renderer's objects, never another's.
    run_dir, mailbox = tmp_path / "breaking", module_mailbox_root / "breaking"
    cases = [BREAKING, *CASES]
    with Gate(run_dir, mailbox, first_observations=len(cases)) as gate:
        _run(
            run_dir,
            mailbox,
            slots=5,
            think_s=6.0,
            cases=cases,
            simulator=open_breaking,
            gated=gated,
        )
    assert gate.opened_by_event, "the five episodes did not all publish a first observation"
    broken = json.loads((run_dir / "episodes" / BREAKING.attempt_id(1) / "result.json").read_text())
    assert (broken["outcome"], broken["termination"]) == ("error", "infrastructure_error")
    assert broken["errors"][0]["code"] == "simulator_exception"
    broke_at = _first_and_end(run_dir, BREAKING)[1]
    live_then = [c for c in CASES if _first_and_end(run_dir, c)[0] < broke_at]
    assert live_then, "no other episode was live when the simulator broke"
    for case in CASES:
        assert _delivered(run_dir, case) == _delivered(solo, case), case.case_id


def test_three_released_states_of_one_task_run_parked_at_once_and_replay_reproduced(
    tmp_path: Path, module_mailbox_root: Path, gated: Path
) -> None:
    """`plan --init-states` makes several episodes of one task; launched with three
    slots, they are live at once on one task host, each parked while the others run,
    and the run replays on simulators of their own, control by control."""
    plan = cli_plan(
        tmp_path / "states.json",
        *("task_coverage", "--suite", "libero_spatial", "--task-ids", "7"),
        *("--init-states", "0,1,2"),
    )
    run_dir, mailbox = tmp_path / "run", module_mailbox_root / "states"
    actor = f"python3 {gated} {{endpoint}} {ACTOR} --chunks 3"
    command = launch_command(plan, run_dir, mailbox, actor, "--slots", "3", "--json")
    with Gate(run_dir, mailbox, first_observations=3) as gate:
        launched = subprocess.run(
            [*command, "--max-policy-calls", "4", "--response-timeout", "600"],
            capture_output=True,
            text=True,
            timeout=900,
        )
    assert launched.returncode == 0, launched.stderr[-3000:]
    assert gate.opened_by_event, "the three episodes were not live at once"
    results = [json.loads(p.read_text()) for p in sorted(run_dir.glob("episodes/*/result.json"))]
    assert sorted(r["case"]["init_state_index"] for r in results) == [0, 1, 2]
    assert {r["simulator"] for r in results} == {"parked"}
    replayed = subprocess.run(
        [mailroom_exe(), "replay", str(run_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    verdicts = json.loads(replayed.stdout)["verdicts"]
    assert len(verdicts) == 3
    assert {v["verdict"] for v in verdicts} == {"reproduced"}, verdicts
    assert all(v["checked_observations"] >= 3 for v in verdicts), verdicts


def _status(run_dir: Path) -> dict[str, int]:
    done = subprocess.run(
        [mailroom_exe(), "status", str(run_dir), "--json"], capture_output=True, text=True
    )
    state: dict[str, int] = json.loads(done.stdout)
    return state


def _wait_for_actors(run_dir: Path, n: int, timeout_s: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        started = actor_started_events(run_dir)
        if len(started) >= n:
            return started
        time.sleep(0.2)
    raise AssertionError(f"{n} actors did not start within {timeout_s} s")


def _plan(tmp: Path) -> Path:
    return cli_plan(tmp / "dev.json", "development")


def test_slots_run_the_development_plan_and_a_killed_actor_fails_its_episode_only(
    tmp_path: Path, module_mailbox_root: Path, gated: Path
) -> None:
    run_dir, mailbox = tmp_path / "run", module_mailbox_root / "dev"
    actor = f"python3 {gated} {{endpoint}} {ACTOR} --chunks 2"
    command = launch_command(_plan(tmp_path), run_dir, mailbox, actor, "--slots", "4")
    with Gate(run_dir, mailbox) as gate:  # opened below, once the test has looked
        launch = subprocess.Popen(
            # Generous: the first actors wait at their gates while the others build.
            [*command, "--max-policy-calls", "3", "--response-timeout", "600"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started = _wait_for_actors(run_dir, 4, 300)
        # Four live (the fifth waits for a slot): none can end before its gate opens.
        deadline = time.monotonic() + 120
        while (state := _status(run_dir))["live"] < 4 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (state["live"], state["queued"], state["done"]) == (4, 1, 0), state
        victim = started[1]
        kill_sandbox_user(victim["confinement"]["outer_uid"])
        gate.open()
        _, err = launch.communicate(timeout=600)
    assert launch.returncode == 0, err[-3000:]
    assert "live episodes: at most 4 (1 worker(s) x 4 slot(s))" in " ".join(err.split())
    results = [json.loads(p.read_text()) for p in sorted(run_dir.glob("episodes/*/result.json"))]
    assert len(results) == 5
    failed = [r for r in results if r["outcome"] == "error"]
    assert len(failed) == 1 and failed[0]["errors"][0]["code"] == "actor_exited"
    assert all(r["termination"] == "actor_stop" for r in results if r["outcome"] != "error")
    assert _status(run_dir)["done"] == 5
    assert sandbox_processes_left(run_dir) == []


def test_a_launch_killed_with_three_live_episodes_records_each_and_resume_completes(
    tmp_path: Path, module_mailbox_root: Path
) -> None:
    run_dir, mailbox = tmp_path / "run", module_mailbox_root / "killed"
    plan = cli_plan(tmp_path / "plan.json", "fast", "--task-ids", "0,1,2")
    actor = f"python3 {ACTOR} {{endpoint}} --think 600"
    launch = subprocess.Popen(
        launch_command(plan, run_dir, mailbox, actor, "--slots", "3", "--record", "minimal"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    _wait_for_actors(run_dir, 3, 300)
    deadline = time.monotonic() + 120
    while _status(run_dir)["live"] < 3 or not all(
        (run_dir / "episodes" / d / "observations" / "obs-1.json").exists()
        for d in os.listdir(run_dir / "episodes")
    ):
        assert time.monotonic() < deadline, "three observations were not published"
        time.sleep(0.2)
    os.killpg(launch.pid, signal.SIGKILL)
    launch.wait(timeout=30)
    assert sandbox_processes_left(run_dir, timeout_s=30) == []
    resumed = subprocess.run(
        [mailroom_exe(), "resume", str(run_dir), "--mailbox-root", str(mailbox), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    results = [json.loads(p.read_text()) for p in sorted(run_dir.glob("episodes/*/result.json"))]
    assert len(results) == 3  # each attempt recorded once, none re-run
    assert all(r["errors"][0]["kind"] == "interrupted" for r in results)
    # Each had started on its task's serving simulator, as its events say.
    assert {r["simulator"] for r in results} == {"parked"}
    report = json.loads(resumed.stdout)
    assert report["overall"]["errored"] == 3 and report["overall"]["unattempted"] == 0
