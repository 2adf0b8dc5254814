"""A LIBERO-Para launch on a real Ray cluster started here (a head and a second node, Ray's
own cluster utilities): the run's kept catalog reaches each Ray worker inside the work it
is handed, never through the driver's environment.

The Ray workers' processes are started by the cluster's raylets, which never see the
variables this process sets when it declares its LIBERO-Para copy (checked here). The
simulator is the fake one, with the production task resolution behind it (the family
registry's: a LIBERO-Para case through the catalog the worker pinned, checked against
the installed Goal files), so what is proved is the catalog's transport,
not the physics; the actor is the diagnostic one, confined in its sandbox.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from campaign_builders import DIAGNOSTIC, campaign_request, diagnostic_actor
from mailroom.benchmarks.libero_para.family import LIBERO_PARA
from mailroom.orchestrator.campaign.coordinator import LaunchConfig, Work
from mailroom.orchestrator.campaign.launch import CampaignRequest, run_campaign
from mailroom.orchestrator.campaign.manifest import build_manifest
from mailroom.orchestrator.cluster.executor import RayExecutor
from mailroom.orchestrator.cluster.local_cluster import local_cluster
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.families.kept import keep_run_catalog, pin_run_catalog
from mailroom.orchestrator.families.plans import build_plan
from mailroom.orchestrator.records.run_directory import RunDirectory
from mailroom.orchestrator.sim.base import SimulatorFactory
from para_copy import make_para_copy

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A head node and one more node process, each with 2 slots and 1 CPU (one worker),
    started before any test declares a LIBERO-Para copy."""
    assert LIBERO_PARA.source.declared is None
    with local_cluster(2, 2, connect=True) as made:
        yield made


@pytest.fixture
def declared_copy(tmp_path: Path) -> Iterator[Path]:
    copy = tmp_path / "LIBERO-Para"
    make_para_copy(copy, goal_tasks=(0, 1))
    LIBERO_PARA.declare_local_copy(copy)
    yield copy
    LIBERO_PARA.source.declare(None)


def _resolving_fake() -> SimulatorFactory:
    """The fake simulator with the production task resolution: a LIBERO-Para case is
    resolved through the catalog the worker's process pinned, else it fails as a worker
    without one fails. Defined here so that Ray pickles it by value (this test module is
    not importable on the nodes)."""
    from mailroom.orchestrator.sim.base import TaskIdentity
    from mailroom.orchestrator.sim.fake import FakeSimulator

    class ResolvingFake(FakeSimulator):
        def resolve_task(self, suite: str, task_index: int, task_order_index: int) -> TaskIdentity:
            from mailroom.orchestrator.families.registry import family_of_suite

            return family_of_suite(suite).resolve_task(suite, task_index, task_order_index)

    return ResolvingFake


def _request(run_dir: Path, mailbox_root: Path, address: str) -> CampaignRequest:
    return campaign_request(
        run_dir,
        mailbox_root,
        plan=build_plan("task_coverage", suite="libero_para", task_ids=[0, 1]),
        actor=diagnostic_actor("--chunks", "3"),
        settings=RunSettings(max_policy_calls=2, replan_interval=5, response_timeout_s=120.0),
        workers=2,
        simulator=_resolving_fake(),
        executor=RayExecutor(address),
    )


def _results(run_dir: Path) -> dict[str, dict[str, Any]]:
    return {
        p.parent.name: json.loads(p.read_text()) for p in run_dir.glob("episodes/*/result.json")
    }


def _worker_environment() -> dict[str, str]:
    """The `MAILROOM_*` variables a Ray worker process on the cluster sees."""

    @ray.remote(num_cpus=0)  # type: ignore[untyped-decorator]
    def read() -> dict[str, str]:
        import os

        return {k: v for k, v in os.environ.items() if k.startswith("MAILROOM_")}

    found: dict[str, str] = ray.get(read.remote())
    return found


def test_a_para_launch_on_ray_resolves_its_cases_by_the_kept_catalog_handed_over(
    cluster: Cluster, declared_copy: Path, tmp_path: Path, module_mailbox_root: Path
) -> None:
    assert LIBERO_PARA.source.declared == declared_copy.resolve()
    assert "MAILROOM_PARA_DIR" not in os.environ  # declared as an object, never inherited
    assert _worker_environment() == {}  # the driver's declaration never reaches a worker
    run_dir = tmp_path / "run"
    request = _request(run_dir, module_mailbox_root, cluster.address)
    heard: list[tuple[str, tuple[Any, ...]]] = []
    outcome = run_campaign(request, lambda kind, payload: heard.append((kind, payload)), print)
    assert outcome.lost == [] and outcome.unrecorded == []
    places = [p[0] for k, p in heard if k == "worker_ready"]
    assert len({p.node_id for p in places}) == 2, "the two workers were not on two nodes"

    kept = LIBERO_PARA.source.catalog()  # the driver pinned the run's kept catalog
    cases = request.plan.to_cases()
    results = _results(run_dir)
    assert sorted(results) == sorted(c.attempt_id(1) for c in cases)
    for case in cases:
        result = results[case.attempt_id(1)]
        entry = kept.entry(case.task_index)
        assert result["errors"] == [], result["errors"]
        # The paraphrase's own instruction and name, resolved in a Ray worker.
        assert result["case"]["instruction"] == entry.instruction != entry.goal_instruction
        assert result["case"]["task_name"] == entry.task_name
        assert result["case"]["bddl_sha256"] == entry.bddl_sha256


def test_without_the_kept_catalog_in_its_work_a_ray_worker_cannot_resolve_a_para_case(
    cluster: Cluster, declared_copy: Path, tmp_path: Path, module_mailbox_root: Path
) -> None:
    """The control: the same work handed over without the kept catalog fails in the
    worker, although the driver has the copy declared and the catalog pinned."""
    run_dir = tmp_path / "run"
    request = _request(run_dir, module_mailbox_root, cluster.address)
    run = RunDirectory(run_dir)
    assert request.launcher is not None and request.launcher.sandbox is not None
    run.write_manifest(
        build_manifest(
            run_id=run_dir.name,
            plan_sha256=request.plan.plan_sha256,
            plan_kind=request.plan.kind,
            n_cases=len(request.plan.cases),
            profile_name=DIAGNOSTIC,
            profile_declaration=request.declaration,
            settings=request.settings,
            actor_command=request.actor_command,
            record="minimal",
            run_dir=run_dir,
            mailbox_root=module_mailbox_root,
            workers=2,
            confinement=request.confinement,
            sandbox_tool=request.launcher.sandbox.tool,
            benchmark="libero_para",
        )
    )
    run.plan_path.write_bytes(request.plan_bytes)
    keep_run_catalog(run.root, "libero_para")
    kept = pin_run_catalog(run.root)
    assert kept is not None
    config = LaunchConfig(
        run_dir=run_dir,
        mailbox_root=module_mailbox_root,
        settings=request.settings,
        record="minimal",
        launcher=request.launcher,
        limits=request.limits,
        simulator=request.simulator,
        kept=kept,
    )
    case = request.plan.to_cases()[0]
    outcome = RayExecutor(cluster.address).run(
        dataclasses.replace(config, kept=None), [Work(case, 1)], 1, lambda *_: None
    )
    # The worker could not start the episode: the attempt is recorded lost, naming why.
    assert [(c, a) for c, a, _ in outcome.lost] == [(case.case_id, 1)], outcome.lost
    assert "no LIBERO-Para copy is declared" in outcome.lost[0][2]
    result = _results(run_dir)[case.attempt_id(1)]
    assert result["outcome"] == "error", result
