"""The Ray executor's books under faults, on a real Ray cluster started here (a head and
a second node, Ray's own cluster utilities), with the fake simulator, real mailboxes,
the real inbox watcher and the diagnostic actor confined in its bubblewrap sandbox:

- an evidence file the driver refuses (a name deeper than an attempt's evidence has,
  planted in the worker's staging copy while the episode runs): the attempt is recorded
  lost with the refusal, its result never comes from the worker, the other episode's
  result is whole;
- a driver that does not record an attempt's first disclosure in time (its loop held
  up): the observation is never published to the actor's endpoint, the episode ends and
  is recorded lost, the other episode's result is whole;
- a node where a trial sandbox cannot start (its libseccomp broken for the node's
  processes): its worker is refused and handed no work; the others run everything.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from campaign_builders import diagnostic_actor, sandboxed_actor
from conftest import sandbox_processes_left
from mailroom.hashing import sha256_bytes
from mailroom.orchestrator.actors.agent_installation import installed_versions
from mailroom.orchestrator.campaign.coordinator import LaunchConfig, Work, WorkOutcome
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.cluster.errors import ClusterUnavailableError
from mailroom.orchestrator.cluster.executor import SLOT_RESOURCE, RayExecutor
from mailroom.orchestrator.cluster.local_cluster import local_cluster
from mailroom.orchestrator.cluster.worker import WorkerPlace
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.records.run_directory import RunDirectory
from mailroom.orchestrator.sim.fake import FakeSimulator
from recorded_events import attempt_events

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

CASES = [
    Case(suite=suite, task_index=0, init_state_index=0, seed=20260907)
    for suite in ("libero_spatial", "libero_goal")
]
# Three task groups: one for each of three workers.
THREE_GROUPS = [
    *CASES,
    Case(suite="libero_goal", task_index=0, init_state_index=1, seed=20260907),
]
# Generous bounds for events that come in seconds.
EVENT_S = 180.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A head node and one more node process, each with 2 slots and 1 CPU (one worker)."""
    with local_cluster(2, 2) as made:
        yield made


def _shorter_ack_wait(seconds: float) -> Callable[[], None]:
    """A Ray worker process's setup: the driver's record of a first disclosure is awaited
    `seconds`, not two minutes (pickled by value: the test module is not on the nodes)."""

    def shorten() -> None:
        import mailroom.orchestrator.cluster.worker as worker

        worker.ACK_TIMEOUT_S = seconds

    return shorten


@contextlib.contextmanager
def _driver(cluster: Cluster, setup: Callable[[], None] | None = None) -> Iterator[None]:
    """This process as a Ray driver of the cluster (a job of its own per test)."""
    runtime_env = {} if setup is None else {"worker_process_setup_hook": setup}
    ray.init(address=cluster.address, log_to_driver=False, runtime_env=runtime_env)
    try:
        yield
    finally:
        ray.shutdown()


def _config(
    run_dir: Path, mailbox_root: Path, cases: list[Case], *, think_s: float, slots: int = 1
) -> LaunchConfig:
    """A launch of the sandboxed diagnostic actor (3 decisions) on the fake simulator,
    with the manifest a launch writes first (a lost attempt's record reads it; its case
    comes from the attempt's endpoint record, so no plan file is written)."""
    actor = sandboxed_actor(
        run_dir, mailbox_root, diagnostic_actor("--chunks", "3", "--think", str(think_s))
    )
    settings = RunSettings(max_policy_calls=3, replan_interval=5, response_timeout_s=120.0)
    RunDirectory(run_dir).write_manifest(
        actor.manifest(
            settings,
            plan_sha256=sha256_bytes(json.dumps([c.model_dump() for c in cases]).encode()),
            plan_kind="task_coverage",
            n_cases=len(cases),
            record="minimal",
            workers=1,
        )
    )
    return actor.config(settings, simulator=FakeSimulator, slots=slots)


def _wait_for(predicate: Callable[[], Any], what: str, timeout_s: float = EVENT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{what} within {timeout_s:.0f} s")


def _logs(log: Path, event: str) -> bool:
    """Whether a log still being written holds `event` (its last line may be torn)."""
    try:
        return f'"{event}"' in log.read_text()
    except FileNotFoundError:
        return False


def _staged_with(place: WorkerPlace, event: str) -> list[Path]:
    """The worker's staged attempt folders whose event log holds `event`."""
    episodes = Path(place.staging) / "run" / "episodes"
    if not episodes.is_dir():
        return []
    return [d for d in sorted(episodes.iterdir()) if _logs(d / "events.jsonl", event)]


def _results(run_dir: Path) -> dict[str, dict[str, Any]]:
    return {
        p.parent.name: json.loads(p.read_text()) for p in run_dir.glob("episodes/*/result.json")
    }


def _assert_whole(result: dict[str, Any]) -> None:
    """An episode that ran to its end: three decisions, no error."""
    assert result["outcome"] == "failure" and result["errors"] == [], result
    assert result["counters"]["policy_calls"] == 3, result["counters"]


class _Heard:
    """What the executor told its listener, and a hook on one kind of message."""

    def __init__(self, on: dict[str, Callable[[tuple[Any, ...]], None]] | None = None) -> None:
        self.heard: list[tuple[str, tuple[Any, ...]]] = []
        self.on = on or {}
        self.places: list[WorkerPlace] = []

    def __call__(self, kind: str, payload: tuple[Any, ...]) -> None:
        self.heard.append((kind, payload))
        if kind == "worker_ready":
            self.places.append(payload[0])
        if kind in self.on:
            self.on[kind](payload)

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        return [p for k, p in self.heard if k == kind]


def _run(
    cluster: Cluster, config: LaunchConfig, cases: list[Case], workers: int, heard: _Heard
) -> WorkOutcome:
    return RayExecutor(cluster.address).run(
        config, [Work(case, 1) for case in cases], workers, heard
    )


def test_a_refused_evidence_file_leaves_the_attempt_recorded_lost(
    cluster: Cluster, tmp_path: Path, module_mailbox_root: Path
) -> None:
    run_dir = tmp_path / "run"
    heard = _Heard()
    planted: list[str] = []

    def plant_a_too_deep_file() -> None:
        place = _wait_for(lambda: heard.places, "no worker started")[0]
        shown = _wait_for(lambda: _staged_with(place, "observation_published"), "nothing shown")
        victim = shown[0]
        deep = victim / "observations" / "planted" / "too" / "deep.json"
        deep.parent.mkdir(parents=True)
        deep.write_text("{}")
        # Planted before the episode ended, so before its files were read to be sent.
        if '"episode_finished"' not in (victim / "events.jsonl").read_text():
            planted.append(victim.name)

    planter = threading.Thread(target=plant_a_too_deep_file, daemon=True)
    planter.start()
    with _driver(cluster):
        outcome = _run(
            cluster, _config(run_dir, module_mailbox_root, CASES, think_s=2.0), CASES, 1, heard
        )
    planter.join(timeout=10)
    assert len(planted) == 1, "the file was not planted while the episode ran"
    victim = planted[0]

    refused = heard.of("evidence_refused")
    assert refused and {a for a, _ in refused} == {victim}, refused
    assert "observations/planted/too/deep.json" in refused[0][1]
    assert [(c, a) for c, a, _ in outcome.lost] == [(victim.rsplit("-a", 1)[0], 1)]
    assert "refused" in outcome.lost[0][2] and outcome.unrecorded == []

    results = _results(run_dir)
    assert sorted(results) == sorted(c.attempt_id(1) for c in CASES)
    lost = results.pop(victim)
    assert lost["outcome"] == "error" and lost["errors"][0]["code"] == "worker_lost", lost
    assert "refused" in lost["errors"][0]["message"]
    assert not (run_dir / "episodes" / victim / "observations" / "planted").exists()
    for result in results.values():
        _assert_whole(result)
    assert sandbox_processes_left(run_dir) == []


def test_an_unrecorded_disclosure_is_never_shown_and_ends_the_episode(
    cluster: Cluster, tmp_path: Path, module_mailbox_root: Path
) -> None:
    run_dir = tmp_path / "run"
    held: list[str] = []

    def hold_the_driver(payload: tuple[Any, ...]) -> None:
        """The driver's loop is held up at the first attempt's start (it runs this
        listener): it neither writes nor acknowledges that attempt's first disclosure
        until the worker has given up on it and ended the episode."""
        if held:
            return
        place = heard.places[0]
        waiting = _wait_for(
            lambda: _staged_with(place, "first_observation_publishing"), "no disclosure"
        )[0]
        held.append(waiting.name)
        # The worker ends the episode and sends its files, then removes its copy.
        _wait_for(lambda: not waiting.exists(), "the episode did not end")

    heard = _Heard(on={"started": hold_the_driver})
    with _driver(cluster, _shorter_ack_wait(10.0)):
        outcome = _run(
            cluster, _config(run_dir, module_mailbox_root, CASES, think_s=0.0), CASES, 1, heard
        )
    assert len(held) == 1
    victim = held[0]

    assert [(c, a) for c, a, _ in outcome.lost] == [(victim.rsplit("-a", 1)[0], 1)]
    reason = outcome.lost[0][2]
    assert "DriverUnreachableError" in reason and "not shown" in reason, reason
    results = _results(run_dir)
    assert sorted(results) == sorted(c.attempt_id(1) for c in CASES)
    lost = results.pop(victim)
    assert lost["outcome"] == "error" and lost["errors"][0]["code"] == "worker_lost", lost
    assert "not shown" in lost["errors"][0]["message"]
    assert lost["counters"]["policy_calls"] == 0
    attempt = run_dir / "episodes" / victim
    events = [e["event"] for e in attempt_events(attempt)]
    assert "first_observation_publishing" in events and "observation_published" not in events
    assert "actor_stopped" in events  # the episode ended: its actor was stopped
    # Nothing was published to the actor: its endpoint's outbox holds the closed notice
    # alone, and no response was claimed.
    endpoint = Path(json.loads((attempt / "endpoint.json").read_text())["endpoint"])
    assert endpoint.is_dir()
    assert sorted(p.name for p in (endpoint / "outbox").iterdir()) == ["closed.json"]
    assert not (attempt / "observations").exists() or not any((attempt / "observations").iterdir())
    assert not (attempt / "responses").exists() or not any((attempt / "responses").iterdir())
    for result in results.values():
        _assert_whole(result)
    assert sandbox_processes_left(run_dir) == []


def test_a_worker_whose_trial_sandbox_fails_gets_no_work(
    cluster: Cluster, tmp_path: Path, module_mailbox_root: Path
) -> None:
    # A third node whose processes load a broken libseccomp (an empty file first on
    # their library path): the sandbox's system-call filter cannot be built there.
    broken = tmp_path / "broken-lib"
    broken.mkdir()
    (broken / "libseccomp.so.2").write_bytes(b"")
    node = cluster.add_node(
        num_cpus=1,
        resources={SLOT_RESOURCE: 2},
        env_vars={"LD_LIBRARY_PATH": str(broken)},
    )
    try:
        cluster.wait_for_nodes()
        run_dir = tmp_path / "run"
        heard = _Heard()
        with _driver(cluster):
            # One worker per node (each has 1 CPU): one of the three is on the broken node.
            outcome = _run(
                cluster,
                _config(run_dir, module_mailbox_root, THREE_GROUPS, think_s=0.0),
                THREE_GROUPS,
                3,
                heard,
            )
    finally:
        cluster.remove_node(node)

    refused = heard.of("worker_refused")
    assert len(refused) == 1, heard.heard
    index, reason = refused[0]
    assert "system-call filter" in reason and "libseccomp" in reason, reason
    assert sorted(p.index for p in heard.places) == sorted({0, 1, 2} - {index})
    assert all(p.node_id != node.node_id for p in heard.places)
    assert heard.of("worker_lost") == [] and heard.of("worker_failed") == []
    assert outcome.lost == [] and outcome.unrecorded == []
    results = _results(run_dir)
    assert sorted(results) == sorted(c.attempt_id(1) for c in THREE_GROUPS)
    for result in results.values():
        _assert_whole(result)
    assert sandbox_processes_left(run_dir) == []


def test_a_node_without_the_runs_agent_cli_versions_gets_no_work(
    cluster: Cluster, tmp_path: Path, module_mailbox_root: Path
) -> None:
    # The run recorded another Claude Code than the one installed at the checkout's path,
    # which is every node's here: each worker checks its node's copy and refuses.
    recorded = installed_versions()
    claude = "npm:@anthropic-ai/claude-code"
    assert recorded.get(claude), "the agent CLIs are installed by `make agent-clis`"
    recorded[claude] = "0.0.1-recorded-elsewhere"
    run_dir = tmp_path / "run"
    config = dataclasses.replace(
        _config(run_dir, module_mailbox_root, CASES[:2], think_s=0.0), agent_cli_versions=recorded
    )
    heard = _Heard()
    with _driver(cluster), pytest.raises(ClusterUnavailableError, match="no Ray worker started"):
        _run(cluster, config, CASES[:2], 2, heard)
    reasons = [reason for _, reason in heard.of("worker_refused")]
    assert len(reasons) == 2 and heard.places == [], heard.heard
    for reason in reasons:
        assert "is not the run's" in reason and claude in reason, reason
        assert "0.0.1-recorded-elsewhere in the run's manifest" in reason, reason
    assert not list(run_dir.glob("episodes/*")), "an episode started"
