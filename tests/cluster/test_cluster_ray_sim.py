"""The Ray executor on a real Ray cluster started here: a head and a second node, each
with its own `mailroom_slot`s, both on this machine (Ray's own cluster utilities).

- Same results: four episodes at D=3 run on the cluster give the counters, image
  hashes, steps, outcomes and evidence files of the local executor's run, in the
  driver's run directory.
- A Ray worker killed mid-episode: its live attempt is recorded `worker_lost` from the
  events the driver holds; its other work runs on the surviving worker.
- A killed driver takes its workers with it; `mailroom resume` with a new driver
  records the attempts its actors had seen as interrupted and finishes the run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from campaign_builders import DIAGNOSTIC_ACTOR, diagnostic_actor, sandboxed_actor
from conftest import cli_plan, launch_command, mailroom_exe, sandbox_processes_left
from mailroom.orchestrator.campaign.coordinator import LaunchConfig, Work, run_work
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.plans import Plan, content_sha256, render_plan
from mailroom.orchestrator.cluster.executor import SLOT_RESOURCE, RayExecutor
from mailroom.orchestrator.cluster.local_cluster import local_cluster
from mailroom.orchestrator.cluster.worker import WorkerPlace
from mailroom.orchestrator.episode.settings import RecordMode, RunSettings
from mailroom.orchestrator.families.plans import build_plan
from mailroom.orchestrator.records.run_directory import RunDirectory
from recorded_events import attempt_events, run_events

ray = pytest.importorskip("ray")

CASES = [
    Case(suite=suite, task_index=0, init_state_index=state, seed=20260907)
    for suite in ("libero_spatial", "libero_goal")
    for state in (0, 1)
]
# Names that differ between any two runs (random tokens, times, paths).
VOLATILE_FILES = {"endpoint.json", "launch_message.json", "events.jsonl", "result.json"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A head node and one more node process, each with 2 slots and 1 CPU."""
    with local_cluster(2, 2, connect=True) as made:
        yield str(made.address)


def _plan_of(cases: list[Case]) -> Plan:
    """A task-coverage plan document holding exactly `cases`."""
    body = build_plan("task_coverage", suite="libero_goal", task_ids=[0]).document()
    body["cases"] = [c.model_dump() for c in cases]
    body["plan_sha256"] = content_sha256(body)
    return Plan.model_validate(body)


def _config(
    run_dir: Path,
    mailbox_root: Path,
    *,
    think_s: float,
    record: RecordMode,
    max_policy_calls: int = 3,
) -> LaunchConfig:
    actor = sandboxed_actor(
        run_dir, mailbox_root, diagnostic_actor("--chunks", "3", "--think", str(think_s))
    )
    settings = RunSettings(
        max_policy_calls=max_policy_calls, replan_interval=5, response_timeout_s=120.0
    )
    # The manifest and plan a launch writes first (an interrupted attempt's record
    # reads them).
    plan = _plan_of(CASES)
    run = RunDirectory(run_dir)
    run.write_manifest(
        actor.manifest(
            settings,
            plan_sha256=plan.plan_sha256,
            plan_kind=plan.kind,
            n_cases=len(CASES),
            record=record,
            workers=2,
        )
    )
    run.plan_path.write_bytes(render_plan(plan))
    return actor.config(settings, simulator=None, record=record)


def _delivered(run_dir: Path, case: Case) -> dict[str, Any]:
    """What the episode showed and did, and the files of its evidence, without times
    and random tokens."""
    episode = run_dir / "episodes" / case.attempt_id(1)
    result = json.loads((episode / "result.json").read_text())
    files = sorted(p.relative_to(episode).as_posix() for p in episode.rglob("*") if p.is_file())
    same_bytes = {
        name: (episode / name).read_bytes()
        for name in files
        if name.rsplit("/", 1)[-1] not in VOLATILE_FILES
        and not name.startswith("responses/")
        and not name.endswith(".json")
    }
    return {
        "images": [e["image_sha256"] for e in attempt_events(episode, "observation_published")],
        "events": [e["event"] for e in attempt_events(episode)],
        "outcome": (result["outcome"], result["termination"], result["truncation"]),
        "counters": result["counters"],
        "state": result["case"]["state_sha256"],
        "files": files,
        "bytes": same_bytes,
    }


def test_a_plan_on_the_cluster_gives_the_local_executors_results(
    cluster: str, tmp_path: Path, module_mailbox_root: Path
) -> None:
    work = [Work(case, 1) for case in CASES]
    local = tmp_path / "local"
    outcome = run_work(
        _config(local, module_mailbox_root, think_s=0.0, record="full"), work, 1, lambda *_: None
    )
    assert outcome.lost == [] and outcome.unrecorded == []

    heard: list[tuple[str, tuple[Any, ...]]] = []
    on_ray = tmp_path / "ray"
    outcome = RayExecutor(cluster).run(
        _config(on_ray, module_mailbox_root, think_s=0.0, record="full"),
        work,
        2,
        lambda kind, payload: heard.append((kind, payload)),
    )
    assert outcome.lost == [] and outcome.unrecorded == []
    places = [p[0] for k, p in heard if k == "worker_ready"]
    assert len({p.node_id for p in places}) == 2, "the two workers were not on two nodes"
    for case in CASES:
        alone, there = _delivered(local, case), _delivered(on_ray, case)
        assert len(alone["images"]) == 3 and "videos/agentview.mp4" in alone["files"]
        assert there == alone, case.case_id
    # Nothing stays behind on the nodes: each worker removed its staging folder.
    assert all(not Path(p.staging).exists() for p in places)
    assert sandbox_processes_left(on_ray) == []


def _wait_for(predicate: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{what} within {timeout_s} s")


def _shown(episodes: Path) -> list[Path]:
    """Attempt folders whose event log records an observation shown to the actor."""
    if not episodes.is_dir():
        return []
    return [
        d
        for d in sorted(episodes.iterdir())
        if (d / "events.jsonl").exists()
        and '"observation_published"' in (d / "events.jsonl").read_text()
    ]


def test_a_killed_ray_worker_loses_only_its_live_attempt(
    cluster: str, tmp_path: Path, module_mailbox_root: Path
) -> None:
    run_dir = tmp_path / "run"
    kept = tmp_path / "staged"
    ready: list[WorkerPlace] = []
    killed: list[str] = []

    def kill_worker_0_mid_episode() -> None:
        victim = _wait_for(lambda: [p for p in ready if p.index == 0], 300, "no worker 0")[0]
        staged = Path(victim.staging) / "run" / "episodes"
        # Killed once the driver holds the line saying so too: the worker mirrors its
        # lines in batches, so a kill right after it wrote one may leave it unsent.
        shown = _wait_for(
            lambda: [
                d
                for d in _shown(staged)
                if d.name in {h.name for h in _shown(run_dir / "episodes")}
            ],
            300,
            "worker 0 showed nothing the driver holds",
        )
        os.kill(victim.pid, signal.SIGKILL)
        _wait_for(lambda: not Path(f"/proc/{victim.pid}").exists(), 60, "worker 0 lived on")
        # What it wrote, as it was when it died: a worker of another run on this machine
        # sweeps a dead worker's staging folder when it starts.
        shutil.copytree(shown[0], kept / shown[0].name, symlinks=True)
        killed.append(shown[0].name)

    killer = threading.Thread(target=kill_worker_0_mid_episode, daemon=True)
    killer.start()

    def listen(kind: str, payload: tuple[Any, ...]) -> None:
        if kind == "worker_ready":
            ready.append(payload[0])

    outcome = RayExecutor(cluster).run(
        _config(run_dir, module_mailbox_root, think_s=3.0, record="minimal"),
        [Work(case, 1) for case in CASES],
        2,
        listen,
    )
    killer.join(timeout=10)
    assert len(killed) == 1, "worker 0 was not killed"
    assert [(c, a) for c, a, _ in outcome.lost] == [(killed[0].rsplit("-a", 1)[0], 1)]
    assert "was lost" in outcome.lost[0][2] and outcome.unrecorded == []
    results = {
        p.parent.name: json.loads(p.read_text()) for p in run_dir.glob("episodes/*/result.json")
    }
    assert sorted(results) == sorted(c.attempt_id(1) for c in CASES)  # none re-run
    lost = results.pop(killed[0])
    assert lost["outcome"] == "error" and lost["errors"][0]["code"] == "worker_lost"
    # The driver held the lost attempt's event lines as the worker wrote them, and its
    # counters agree with what was published to the endpoint and claimed from it.
    staged = kept
    held = (run_dir / "episodes" / killed[0] / "events.jsonl").read_text().splitlines()
    written = (staged / killed[0] / "events.jsonl").read_text().splitlines()
    assert held == written[: len(held)] and '"observation_published"' in "".join(held)
    endpoint = Path(json.loads((staged / killed[0] / "endpoint.json").read_text())["endpoint"])
    published = len(list((endpoint / "outbox").glob("obs-*.json")))
    claimed = len(list((staged / killed[0] / "responses").iterdir()))
    assert published >= 1 and lost["counters"]["policy_calls"] == claimed
    assert lost["counters"]["executed_controls"] == 5 * (published - 1)
    assert all(r["outcome"] != "error" for r in results.values()), results
    # The killed worker's other case ran on the surviving worker.
    assert len(results) == 3
    assert sandbox_processes_left(run_dir, timeout_s=30) == []


def test_a_killed_driver_is_resumed_by_a_new_one_and_nothing_is_lost(
    cluster: str, tmp_path: Path, module_mailbox_root: Path
) -> None:
    run_dir, mailbox = tmp_path / "run", module_mailbox_root / "driver"
    actor = f"python3 {DIAGNOSTIC_ACTOR} {{endpoint}} --think 6"
    command = launch_command(
        cli_plan(tmp_path / "plan.json", "fast", "--task-ids", "0,1,2"),
        run_dir,
        mailbox,
        actor,
        *("--executor", "ray", "--ray-address", cluster, "--workers", "2"),
        *("--max-policy-calls", "3", "--record", "minimal"),
    )
    driver = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    shown = _wait_for(
        lambda: (found := _shown(run_dir / "episodes")) and len(found) >= 2 and found,
        300,
        "two attempts were not shown",
    )
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait(timeout=30)
    # Ray ends the dead driver's workers, and with them their sandboxed actors.
    assert sandbox_processes_left(run_dir, timeout_s=60) == []
    assert not any((d / "result.json").exists() for d in shown)
    resumed = subprocess.run(
        [mailroom_exe(), "resume", str(run_dir), "--mailbox-root", str(mailbox), "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    results = {
        p.parent.name: json.loads(p.read_text()) for p in run_dir.glob("episodes/*/result.json")
    }
    cases = {name.rsplit("-a", 1)[0] for name in results}
    assert len(cases) == 3 and len(results) == 3  # each case once, none re-run
    for seen in shown:
        assert results[seen.name]["errors"][0]["kind"] == "interrupted"
    finished = [r for name, r in results.items() if name not in {d.name for d in shown}]
    assert len(finished) == 1 and finished[0]["outcome"] != "error"
    report = json.loads(resumed.stdout)
    assert report["overall"]["unattempted"] == 0 and report["overall"]["errored"] == 2
    resumes = run_events(run_dir, "resumed")
    assert resumes and resumes[-1]["executor"] == "ray" and resumes[-1]["ray_address"] == cluster
    assert sandbox_processes_left(run_dir) == []


def _launch(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    command = launch_command(
        cli_plan(tmp_path / "plan.json", "fast", "--task-ids", "0"),
        tmp_path / "run",
        tmp_path / "mb",
        f"python3 {DIAGNOSTIC_ACTOR} {{endpoint}}",
        *options,
    )
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_a_cluster_without_room_or_answer_is_refused_before_anything_is_written(
    cluster: str, tmp_path: Path
) -> None:
    # 3 workers of 2 slots: the two nodes declare 2 mailroom_slot each.
    crowded = _launch(
        tmp_path, "--executor", "ray", "--ray-address", cluster, "--workers", "3", "--slots", "2"
    )
    assert crowded.returncode == 9, crowded.stderr
    said = " ".join(crowded.stderr.split())
    assert "places 2 worker(s) of 2 slot(s), not 3" in said and SLOT_RESOURCE in said
    silent = _launch(tmp_path, "--executor", "ray", "--ray-address", "127.0.0.1:1")
    assert silent.returncode == 9 and "does not answer" in " ".join(silent.stderr.split())
    assert not (tmp_path / "run").exists()
    mixed = _launch(tmp_path, "--ray-address", cluster)
    assert mixed.returncode == 2 and "--executor ray" in mixed.stderr
