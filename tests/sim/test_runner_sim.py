"""Episode-runner rules on the real simulator, through real mailbox files.

One adapter (one LIBERO env per task) is shared by the whole module; budgets are short.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mailroom.benchmarks.libero.adapter import LiberoAdapter
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.campaign.interrupted import counters_from_events
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.episode.blinded import run_blinded_episode, run_in_process_episode
from mailroom.orchestrator.episode.settings import ConfigurationError, RecordMode, RunSettings
from mailroom.orchestrator.families.registry import reference_horizon
from mailroom.orchestrator.records.result import EpisodeResult
from mailroom.orchestrator.sim.base import ControlOutcome
from mailroom.orchestrator.transport.png import decode_png
from mailroom.orchestrator.transport.policy import PolicyObservation
from recorded_events import attempt_events
from thread_actor import Script, ThreadActor, act, stop, thread_launcher

CASE = Case(suite="libero_10", task_index=0, init_state_index=0, seed=20260907)
STOVE = Case(suite="libero_goal", task_index=7, init_state_index=0, seed=20260907)
STILL = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0]


@pytest.fixture(scope="module")
def adapter() -> Iterator[LiberoAdapter]:
    shared = LiberoAdapter(control_cap=1000)
    yield shared
    shared.close()


def _settings(**overrides: Any) -> RunSettings:
    base: dict[str, Any] = {"max_policy_calls": 10, "replan_interval": 5, "response_timeout_s": 60}
    base.update(overrides)
    return RunSettings(**base)


def _run(
    adapter: LiberoAdapter,
    tmp_path: Path,
    script: Script,
    settings: RunSettings,
    case: Case = CASE,
    record: RecordMode = "full",
) -> tuple[EpisodeResult, ThreadActor, Path]:
    adapter.set_control_cap(settings.control_cap(reference_horizon(case.suite).controls))
    actors: list[ThreadActor] = []
    run_dir = tmp_path / "run"
    result = run_blinded_episode(
        case,
        attempt=1,
        settings=settings,
        adapter=adapter,
        run_dir=run_dir,
        mailbox_root=tmp_path / "mb",
        launch_actor=thread_launcher(script, actors),
        record=record,
    )
    assert schema_errors("mailroom.episode_result/v8", result.document()) == []
    c = result.counters
    assert c.policy_calls == c.action_decisions + c.rejected_responses + c.stop_responses
    episode_dir = run_dir / "episodes" / result.attempt_id
    check_records(result, episode_dir, record)
    return result, actors[0], episode_dir


def check_records(result: EpisodeResult, episode_dir: Path, record: RecordMode = "full") -> None:
    """On the real runner: the counters rebuilt from the event log (as for an interrupted
    attempt) equal the result's, and the step rows are the executed prefixes in order."""
    events = attempt_events(episode_dir)
    rebuilt = counters_from_events(events)
    per_episode = {"first_success_control", "first_success_policy_call"}
    assert rebuilt.model_dump(exclude=per_episode) == result.counters.model_dump(
        exclude=per_episode
    )
    steps = [json.loads(line) for line in (episode_dir / "steps.jsonl").read_text().splitlines()]
    executed = [
        (e["sequence"], action)
        for e in events
        if e["event"] == "actions_executed"
        for action in e["executed_prefix"]
    ]
    assert len(steps) == result.counters.executed_controls == len(executed)
    assert [row["frame_index"] for row in steps] == list(range(len(steps)))
    assert [row["action"] for row in steps] == [action for _, action in executed]
    claimed = [e for e in events if e["event"] == "response_claimed"]
    calls = [row["policy_call"] for row in steps]
    assert calls == sorted(calls) and set(calls) <= set(range(1, len(claimed) + 1))
    success = [row["frame_index"] + 1 for row in steps if row["native_success"]]
    assert success == (
        []
        if result.counters.first_success_control is None
        else [result.counters.first_success_control]
    )
    # What the actor was shown is what the run keeps: the private copies are the outbox
    # bytes, and every observation, a feedback redelivery included, has a fresh id.
    endpoint = Path(json.loads((episode_dir / "endpoint.json").read_text())["endpoint"])
    # A minimal record keeps the observation documents, not the images.
    shown = "obs-*" if record == "full" else "obs-*.json"
    published = sorted(p.name for p in (endpoint / "outbox").glob(shown))
    kept = sorted(p.name for p in (episode_dir / "observations").iterdir())
    assert published == kept and published
    for name in published:
        assert (endpoint / "outbox" / name).read_bytes() == (
            episode_dir / "observations" / name
        ).read_bytes()
    ids = [
        json.loads((endpoint / "outbox" / name).read_text())["request_id"]
        for name in published
        if name.endswith(".json")
    ]
    assert len(ids) == len(set(ids)) >= result.counters.policy_calls  # each call answered one


def _invalid_three_times(observation: dict[str, Any]) -> dict[str, Any] | bytes:
    n = observation["sequence"]
    if n == 1:
        return act(observation, [[0.0] * 8])  # wrong vector length
    if n == 2:
        return act(observation, [[0.0, 0.0, 1.5, 0.0, 0.0, 0.0, -1.0]])  # out of bounds
    if n == 3:
        return (
            b'{"schema": "mailroom.response/v1", "request_id": "%s", "decision": "act",'
            % (observation["request_id"].encode())
            + b' "actions": [[NaN, 0, 0, 0, 0, 0, -1]]}'
        )
    if n == 4:
        return act(observation, [STILL] * 5)
    return stop(observation)


def test_feedback_rejects_whole_responses_and_redelivers_the_same_capture(
    adapter: LiberoAdapter,
    tmp_path: Path,
) -> None:
    result, actor, episode_dir = _run(
        adapter, tmp_path, _invalid_three_times, _settings(invalid_action_handling="feedback")
    )
    c = result.counters
    assert (c.rejected_responses, c.action_decisions, c.stop_responses) == (3, 1, 1)
    assert c.policy_calls == 5 and c.executed_controls == 5
    assert result.termination == "actor_stop" and result.outcome == "failure"
    feedback = [o["feedback"] for o in actor.observations]
    assert feedback[0] is None and feedback[4] is None
    assert [f["rejected_sequence"] for f in feedback[1:4]] == [1, 2, 3]
    assert [f["issues"][0]["code"] for f in feedback[1:4]] == [
        "wrong_vector_length",
        "out_of_bounds",
        "non_finite_literal",
    ]
    # Observations 1-4 carry the same sensor capture: identical pixels.
    outbox = next((tmp_path / "mb").iterdir()) / "outbox"
    for camera in ("agentview", "robot0_eye_in_hand"):
        first = decode_png((outbox / f"obs-1-{camera}.png").read_bytes())
        for n in (2, 3, 4):
            assert np.array_equal(
                first, decode_png((outbox / f"obs-{n}-{camera}.png").read_bytes())
            )
        assert not np.array_equal(first, decode_png((outbox / f"obs-5-{camera}.png").read_bytes()))
    executed = attempt_events(episode_dir, "actions_executed")
    assert [e["sequence"] for e in executed] == [4]  # nothing of a rejected call ran


def test_terminal_handling_ends_on_the_first_invalid_response(
    adapter: LiberoAdapter,
    tmp_path: Path,
) -> None:
    result, _, _ = _run(
        adapter, tmp_path, _invalid_three_times, _settings(invalid_action_handling="terminal")
    )
    assert result.outcome == "error" and result.termination == "policy_error"
    assert [(e.kind, e.code, e.policy_call) for e in result.errors] == [
        ("policy_error", "wrong_vector_length", 1)
    ]
    assert (result.counters.policy_calls, result.counters.executed_controls) == (1, 0)


def test_decision_budget_truncates_at_the_policy_call_cap(
    adapter: LiberoAdapter,
    tmp_path: Path,
) -> None:
    frozen_while_acting: list[int] = []

    def script(observation: dict[str, Any]) -> dict[str, Any] | bytes:
        frozen_while_acting.append(gc.get_freeze_count())
        return act(observation, [STILL] * 5)

    result, actor, _ = _run(
        adapter,
        tmp_path,
        script,
        _settings(budget_mode="decisions", max_policy_calls=3, replan_interval=5),
    )
    # The heap is frozen for the policy loop only (episode/collector_freeze.py).
    assert len(frozen_while_acting) == 3 and min(frozen_while_acting) > 10_000
    assert gc.get_freeze_count() == 0
    c = result.counters
    assert (c.policy_calls, c.action_decisions, c.executed_controls) == (3, 3, 15)
    assert result.truncated and result.truncation == "policy_call_cap"
    assert result.termination is None and result.outcome == "failure"
    assert result.settings.control_cap == 15
    assert len(actor.observations) == 3  # no observation is published past the budget
    # In decisions mode the budgets are public: D and the control cap D x K.
    assert actor.observations[0]["counters"]["max_policy_calls"] == 3
    assert actor.observations[0]["counters"]["max_controls"] == 15


def test_horizon_budget_truncates_at_the_reference_horizon_and_keeps_it_private(
    adapter: LiberoAdapter,
    tmp_path: Path,
) -> None:
    """`horizon` mode: the control cap is the suite's reference horizon, which the actor
    is never shown (it would name the suite); no policy-call cap."""
    settings = _settings(
        budget_mode="horizon", max_policy_calls=None, replan_interval=64, response_timeout_s=60
    )
    horizon = reference_horizon(STOVE.suite).controls
    # No video: 300 controls rendered each for it would be most of this test's time.
    result, actor, _ = _run(
        adapter, tmp_path, lambda o: act(o, [STILL] * 64), settings, STOVE, record="minimal"
    )
    c = result.counters
    assert result.truncated and result.truncation == "control_cap"
    assert result.outcome == "failure" and result.termination is None
    assert c.executed_controls == horizon == result.settings.control_cap
    assert c.policy_calls == -(-horizon // 64)  # the last chunk cut at the cap
    for observation in actor.observations:
        assert observation["counters"]["max_controls"] is None
        assert observation["counters"]["max_policy_calls"] is None


def test_silent_actor_times_out_and_nothing_runs_after_its_last_decision(
    adapter: LiberoAdapter,
    tmp_path: Path,
) -> None:
    result, _, episode_dir = _run(
        adapter,
        tmp_path,
        lambda o: act(o, [STILL] * 5) if o["sequence"] == 1 else None,
        _settings(response_timeout_s=1.0),
    )
    assert result.outcome == "error" and result.termination == "actor_timeout"
    assert [(e.kind, e.policy_call) for e in result.errors] == [("actor_timeout", 2)]
    assert (result.counters.policy_calls, result.counters.executed_controls) == (1, 5)
    flow = [
        (e["event"], e.get("sequence"))
        for e in attempt_events(episode_dir)
        if e["event"] in ("observation_published", "actions_executed", "closed_published")
    ]
    assert flow == [
        ("observation_published", 1),
        ("actions_executed", 1),
        ("observation_published", 2),
        ("closed_published", None),
    ]


def test_chunks_execute_at_most_k_and_shorter_chunks_fewer(
    adapter: LiberoAdapter,
    tmp_path: Path,
) -> None:
    def script(o: dict[str, Any]) -> dict[str, Any]:
        return {1: act(o, [STILL] * 2), 2: act(o, [STILL] * 8)}.get(o["sequence"], stop(o))

    result, _, episode_dir = _run(adapter, tmp_path, script, _settings(max_chunk=8))
    assert result.counters.executed_controls == 2 + 5
    prefixes = [len(e["executed_prefix"]) for e in attempt_events(episode_dir, "actions_executed")]
    assert prefixes == [2, 5]


def test_stop_persistence_rule_defers_stop_without_awarding_anything(
    adapter: LiberoAdapter,
    tmp_path: Path,
) -> None:
    def script(o: dict[str, Any]) -> dict[str, Any]:
        return act(o, [STILL]) if o["sequence"] in (2, 3) else stop(o)

    result, actor, _ = _run(adapter, tmp_path, script, _settings(min_decisions_before_stop=2))
    c = result.counters
    assert (c.stop_responses, c.action_decisions, c.policy_calls) == (2, 2, 4)
    assert actor.observations[1]["feedback"]["issues"][0]["code"] == "stop_deferred"
    assert result.termination == "actor_stop" and result.outcome == "failure"


def test_wall_time_limit_truncates(adapter: LiberoAdapter, tmp_path: Path) -> None:
    result, _, _ = _run(
        adapter,
        tmp_path,
        lambda o: act(o, [STILL]) if o["sequence"] == 1 else None,
        _settings(episode_wall_time_s=1.0, response_timeout_s=60),
    )
    assert result.truncation == "wall_time" and result.termination is None
    assert result.outcome == "failure" and result.errors == []


def test_adapter_and_runner_caps_must_agree_before_anything_starts(tmp_path: Path) -> None:
    unbuilt = LiberoAdapter(control_cap=999)  # never builds an env: the check comes first
    with pytest.raises(ConfigurationError):
        run_blinded_episode(
            CASE,
            attempt=1,
            settings=_settings(max_policy_calls=3),
            adapter=unbuilt,
            run_dir=tmp_path / "run",
            mailbox_root=tmp_path / "mb",
            launch_actor=None,
        )
    assert not (tmp_path / "mb").exists() and not (tmp_path / "run").exists()


class _StoveTurnedOnAt(LiberoAdapter):
    """Turns the stove knob on in the real simulator just before control `at` runs."""

    at = 7

    def step(self, action: Any, *, observe: bool) -> ControlOutcome:
        self.sent = getattr(self, "sent", 0) + 1
        if self.sent == self.at:
            env = self._env.env
            for joint in env.get_object("flat_stove_1").joints:
                env.sim.data.qpos[env.sim.model.get_joint_qpos_addr(joint)] = 1.0
            env.sim.forward()
        return super().step(action, observe=observe)


def test_native_success_stops_at_the_first_successful_control(tmp_path: Path) -> None:
    forcing = _StoveTurnedOnAt(control_cap=50)
    try:
        result, _, episode_dir = _run(
            forcing,
            tmp_path,
            lambda o: act(o, [STILL] * 5),
            _settings(max_policy_calls=10, replan_interval=5),
            case=STOVE,
        )
    finally:
        forcing.close()
    c = result.counters
    assert result.outcome == "success" and result.termination == "native_success"
    assert (c.first_success_control, c.first_success_policy_call) == (7, 2)
    assert c.executed_controls == 7 and c.policy_calls == 2
    executed = attempt_events(episode_dir, "actions_executed")
    assert [len(e["executed_prefix"]) for e in executed] == [5, 2]  # rest of chunk 2 unrun


class _ScriptedPolicy:
    def __init__(self, script: Script) -> None:
        self.script = script

    def act(self, observation: PolicyObservation) -> object:
        answer = self.script(observation.document.model_dump(mode="json", by_alias=True))
        return json.loads(answer) if isinstance(answer, bytes) else answer


def test_in_process_policy_and_mailbox_give_identical_records(
    adapter: LiberoAdapter,
    tmp_path: Path,
) -> None:
    settings = _settings(max_policy_calls=6)
    via_mailbox, _, mailbox_dir = _run(adapter, tmp_path / "m", _invalid_two_then_act, settings)
    via_policy = run_in_process_episode(
        CASE,
        attempt=1,
        settings=settings,
        adapter=adapter,
        run_dir=tmp_path / "p" / "run",
        policy=_ScriptedPolicy(_invalid_two_then_act),
    )
    volatile = {"started_at", "finished_at", "wall_time_s", "latency", "queue_delay", "processing"}
    assert via_policy.model_dump(exclude=volatile) == via_mailbox.model_dump(exclude=volatile)
    policy_dir = tmp_path / "p" / "run" / "episodes" / via_policy.attempt_id
    assert _event_skeleton(mailbox_dir) == _event_skeleton(policy_dir)


def _invalid_two_then_act(observation: dict[str, Any]) -> dict[str, Any]:
    n = observation["sequence"]
    if n <= 2:
        return act(observation, [[0.0, 0.0, 2.0, 0.0, 0.0, 0.0, -1.0]])
    if n <= 4:
        return act(observation, [[0.0, 0.0, 0.3, 0.0, 0.0, 0.0, -1.0]] * 5)
    return stop(observation)


def _event_skeleton(episode_dir: Path) -> list[tuple[Any, ...]]:
    keep = {"observation_published", "response_claimed", "actions_executed", "episode_finished"}
    out: list[tuple[Any, ...]] = []
    for e in attempt_events(episode_dir):
        if e["event"] in keep:
            out.append(
                (
                    e["event"],
                    e.get("sequence"),
                    e.get("outcome"),
                    json.dumps(e.get("executed_prefix")),
                    json.dumps(e.get("counters")),
                )
            )
    return out
