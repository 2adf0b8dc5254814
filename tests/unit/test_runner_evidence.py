"""The runner's evidence without the simulator: step rows and the event log.

The fake simulator (`sim/fake.py`: the Simulator Protocol, synthetic frames, no
physics) drives the real runner through the real mailbox transport; the actor answers
inline.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from mailroom.benchmarks.libero_plus.init_states import InitStatesError
from mailroom.mailbox.endpoint import Endpoint, create_endpoint
from mailroom.mailbox.parser import ActionLimits
from mailroom.orchestrator.campaign.interrupted import counters_from_events
from mailroom.orchestrator.episode.evidence import EpisodeEvidence
from mailroom.orchestrator.episode.runner import EpisodeRequest, EpisodeRunner
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.perf.detection import write_response
from mailroom.orchestrator.records.confinement import ConfinementRecord
from mailroom.orchestrator.records.layout import STEPS_FILE
from mailroom.orchestrator.results.steps_file import read_steps
from mailroom.orchestrator.sim.base import Capture, EpisodeStart, TaskIdentity
from mailroom.orchestrator.sim.fake import FAKE_IDENTITY, FakeSimulator
from mailroom.orchestrator.transport.base import Arrival, DecisionOutcome, Delivery
from mailroom.orchestrator.transport.mailbox import MailboxTransport
from recorded_events import attempt_events

K = 3
CALLS = 4
CAPTURE = Capture(
    images={"agentview": np.zeros((16, 16, 3), dtype=np.uint8)}, joint_pos=None, gripper_qpos=None
)


class InlineActor:
    """Answers each observation before the wait; notes the step rows not written by then."""

    def __init__(self, inner: MailboxTransport, evidence: EpisodeEvidence) -> None:
        self.inner = inner
        self.evidence = evidence
        self.rows_seen: list[int] = []

    def deliver(self, delivery: Delivery) -> None:
        self.inner.deliver(delivery)

    def await_decision(
        self, delivery: Delivery, limits: ActionLimits, timeout_s: float
    ) -> DecisionOutcome:
        endpoint: Endpoint = self.inner.endpoint
        value = 0.1 * delivery.sequence
        body = {
            "schema": "mailroom.response/v1",
            "request_id": delivery.request_id,
            "decision": "act",
            "actions": [[value, 0, 0, 0, 0, 0, -1]] * K,
        }
        write_response(endpoint.response_file(delivery.sequence), json.dumps(body).encode())
        self.rows_seen.append(len(self.evidence.pending_steps))
        return self.inner.await_decision(delivery, limits, timeout_s)

    def arrival(self) -> Arrival:
        return self.inner.arrival()

    def close(self, last_sequence: int) -> None:
        self.inner.close(last_sequence)


def test_every_executed_control_has_its_step_row_in_order(tmp_path: Path) -> None:
    settings = RunSettings(max_policy_calls=CALLS, replan_interval=K, response_timeout_s=10)
    runner = EpisodeRunner(FakeSimulator(control_cap=CALLS * K, frames=lambda: CAPTURE), settings)
    endpoint = create_endpoint(tmp_path / "mailbox")
    evidence = EpisodeEvidence(tmp_path / "private" / "episodes" / "a-1")
    actor = InlineActor(MailboxTransport(endpoint, evidence), evidence)
    request = EpisodeRequest(
        "a-1",
        "c",
        FAKE_IDENTITY,
        0,
        0,
        CALLS * K,
        ConfinementRecord(mode="none", network="host"),
        "v1",
    )
    try:
        result = runner.run(request, actor, evidence)
    finally:
        evidence.close()
        endpoint.held.close()
    assert result.counters.executed_controls == CALLS * K
    # The rows of a chunk are written once the next observation is out, before the wait.
    assert actor.rows_seen == [0] * CALLS
    rows = read_steps(evidence.directory / STEPS_FILE, proprio=False, dimension=7)
    assert rows.frame_index.tolist() == list(range(CALLS * K))
    assert rows.policy_call.tolist() == [call for call in range(1, CALLS + 1) for _ in range(K)]
    assert [round(float(a[0]), 6) for a in rows.action[::K]] == [0.1, 0.2, 0.3, 0.4]
    assert counters_from_events(attempt_events(evidence.directory)) == result.counters


def test_step_rows_are_kept_until_written_and_close_writes_the_rest(tmp_path: Path) -> None:
    evidence = EpisodeEvidence(tmp_path / "a-1")
    path = tmp_path / "a-1" / STEPS_FILE
    evidence.step({"frame_index": 0, "policy_call": 1})
    evidence.step({"frame_index": 1, "policy_call": 1})
    assert len(evidence.pending_steps) == 2
    evidence.write_steps()
    assert evidence.pending_steps == []
    evidence.step({"frame_index": 2, "policy_call": 2})
    evidence.close()
    frames = [json.loads(line)["frame_index"] for line in path.read_text().splitlines()]
    assert frames == [0, 1, 2]
    evidence.close()  # twice is harmless


class RefusedStatesSimulator(FakeSimulator):
    """Its initial-states file is refused as the LIBERO-Plus reader refuses one."""

    def start_episode(
        self, identity: TaskIdentity, init_state_index: int, seed: int
    ) -> EpisodeStart:
        raise InitStatesError("states.pruned_init: refused pickle (global os.system)")


def test_a_refused_package_file_ends_the_episode_as_a_simulator_exception(
    tmp_path: Path,
) -> None:
    """A package error (`packages/`) is no SimulatorError, yet the episode records it as
    one: the task could not be run as the catalog says."""
    settings = RunSettings(max_policy_calls=CALLS, replan_interval=K, response_timeout_s=10)
    runner = EpisodeRunner(RefusedStatesSimulator(control_cap=CALLS * K), settings)
    endpoint = create_endpoint(tmp_path / "mailbox")
    evidence = EpisodeEvidence(tmp_path / "private" / "episodes" / "a-1")
    request = EpisodeRequest(
        "a-1",
        "c",
        FAKE_IDENTITY,
        0,
        0,
        CALLS * K,
        ConfinementRecord(mode="none", network="host"),
        "v1",
    )
    try:
        result = runner.run(request, MailboxTransport(endpoint, evidence), evidence)
    finally:
        evidence.close()
        endpoint.held.close()
    assert result.outcome == "error"
    [error] = result.errors
    assert (error.kind, error.code) == ("infrastructure_error", "simulator_exception")
    assert "refused pickle" in error.message
