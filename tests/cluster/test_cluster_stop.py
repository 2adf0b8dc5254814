"""A launch on the Ray executor stopped by a person, on a real Ray cluster started here (a
head and a second node): the stop that Ctrl-C or SIGTERM requests (`StopRequest`, set
by the command's signal handler, `cli/launch_stop.py`) lands while attempts are live on
both nodes.

The campaign is the one `mailroom launch --executor ray` runs (`run_campaign`), with the
fake simulator and the diagnostic actor confined in its sandbox, thinking a few seconds
a decision. After the stop: the campaign returns at once; each attempt cut short after
its actor saw an observation is recorded as interrupted with the stop's reason, the
finished ones are untouched; the run's `launch_stopped` event counts them; no Ray worker
process, sandbox or actor is left; and a resume of the run completes every case without
running an interrupted attempt again.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from campaign_builders import campaign_request, diagnostic_actor
from conftest import sandbox_processes_left
from mailroom.orchestrator.campaign.coordinator import WorkOutcome
from mailroom.orchestrator.campaign.launch import CampaignRequest, run_campaign
from mailroom.orchestrator.cluster.executor import RayExecutor
from mailroom.orchestrator.cluster.local_cluster import local_cluster
from mailroom.orchestrator.cluster.worker import WorkerPlace
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.families.plans import build_plan
from mailroom.orchestrator.records.result import EpisodeResult
from mailroom.orchestrator.records.run_directory import RunDirectory
from mailroom.orchestrator.sim.fake import FakeSimulator

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

THINK_S = 4  # each answer: an attempt stays live well past the stop
LIVE_WITHIN_S = 180.0
STOPPED_WITHIN_S = 60.0
GONE_WITHIN_S = 15.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A head node and one more node process, each with 1 slot and 1 CPU (one worker)."""
    with local_cluster(2, 1, connect=True) as made:
        yield made


def _request(run_dir: Path, mailbox_root: Path, address: str) -> CampaignRequest:
    """Four cases of four tasks (a task group each) on two workers, one slot each."""
    return campaign_request(
        run_dir,
        mailbox_root,
        plan=build_plan("task_coverage", suite="libero_goal", task_ids=[0, 1, 2, 3]),
        actor=diagnostic_actor("--chunks", "1", "--think", str(THINK_S)),
        settings=RunSettings(max_policy_calls=3, replan_interval=5, response_timeout_s=120.0),
        simulator=FakeSimulator,
        workers=2,
        executor=RayExecutor(address),
    )


def _recorded_and_live(run_dir: Path) -> bool:
    """At least one attempt recorded and two whose actors have seen an observation live
    (one on each worker)."""
    attempts = RunDirectory(run_dir).attempts() if (run_dir / "episodes").is_dir() else []
    recorded = [a for a in attempts if a.result is not None]
    live = [a for a in attempts if a.result is None and a.actor_saw_anything()]
    return bool(recorded) and len(live) >= 2


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _left(pids: list[int]) -> list[int]:
    deadline = time.monotonic() + GONE_WITHIN_S
    while (left := [pid for pid in pids if _alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def test_a_stopped_ray_launch_records_the_live_attempts_and_leaves_no_process(
    cluster: Cluster, tmp_path: Path, module_mailbox_root: Path
) -> None:
    run_dir = tmp_path / "run"
    request = _request(run_dir, module_mailbox_root, cluster.address)
    heard: list[tuple[str, tuple[Any, ...]]] = []
    ended: list[WorkOutcome] = []

    def campaign() -> None:
        ended.append(run_campaign(request, lambda k, p: heard.append((k, p)), lambda n: None))

    runner = threading.Thread(target=campaign, daemon=True)
    runner.start()
    deadline = time.monotonic() + LIVE_WITHIN_S
    while not _recorded_and_live(run_dir):
        assert runner.is_alive(), "the campaign ended before the stop"
        assert time.monotonic() < deadline, "no two attempts were live after one was recorded"
        time.sleep(0.1)
    before = {a.attempt_id: a for a in RunDirectory(run_dir).attempts()}
    finished = {
        k: (a.directory / "result.json").read_bytes() for k, a in before.items() if a.result
    }
    live = sorted(k for k, a in before.items() if a.result is None and a.actor_saw_anything())
    places = [p[0] for k, p in heard if k == "worker_ready"]
    assert len({p.node_id for p in places}) == 2 and all(isinstance(p, WorkerPlace) for p in places)

    asked = time.monotonic()
    request.stop.request(signal.SIGINT)
    runner.join(timeout=STOPPED_WITHIN_S)
    assert not runner.is_alive(), "the campaign did not stop"
    print(f"stopped in {time.monotonic() - asked:.1f} s with {len(live)} live attempt(s)")
    assert [k for k, _ in heard].count("stopping") == 1

    # No Ray worker process, sandbox or actor is left.
    assert _left([p.pid for p in places]) == []
    assert sandbox_processes_left(run_dir) == []

    after = {a.attempt_id: a for a in RunDirectory(run_dir).attempts()}
    for attempt_id, data in finished.items():
        assert (after[attempt_id].directory / "result.json").read_bytes() == data
    cut_short = sorted(
        k
        for k, a in after.items()
        if isinstance(a.result, EpisodeResult)
        and [e.kind for e in a.result.errors] == ["interrupted"]
    )
    assert set(live) <= set(cut_short), (live, cut_short)
    for attempt_id in cut_short:
        result = after[attempt_id].result
        assert isinstance(result, EpisodeResult)
        assert "stopped (SIGINT)" in result.errors[0].message
    stopped = [e for e in RunDirectory(run_dir).events() if e.get("event") == "launch_stopped"]
    assert [(e["signal"], e["interrupted"]) for e in stopped] == [("SIGINT", len(cut_short))]

    # A resume (a fresh request: its own stop) runs what is left; nothing recorded moves.
    kept = {k: (a.directory / "result.json").read_bytes() for k, a in after.items() if a.result}
    resumed = run_campaign(
        _request(run_dir, module_mailbox_root, cluster.address), lambda k, p: None, lambda n: None
    )
    assert resumed.lost == [] and resumed.unrecorded == []
    final = {a.attempt_id: a for a in RunDirectory(run_dir).attempts()}
    assert len({a.case_id for a in final.values()}) == 4
    assert all(isinstance(a.result, EpisodeResult) for a in final.values())
    for attempt_id, data in kept.items():
        assert (final[attempt_id].directory / "result.json").read_bytes() == data
    assert sandbox_processes_left(run_dir) == []
