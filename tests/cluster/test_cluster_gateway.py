"""The provider gateway on a real Ray cluster started here (a head and a second node):
each worker runs its own gateway, and the launch's provider key reaches the workers only
through the driver's call (the nodes were started before the key was set, so their
processes' environments cannot hold it). A sandboxed agent-like actor on the fake
simulator reaches the stand-in provider through its worker's gateway; its usage is
metered; the key is nowhere in the run directory or in Ray's session folder (its logs,
its spilled objects).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import copied_actor, sandbox_processes_left
from mailroom.orchestrator.actors.confinement import ConfinementSettings
from mailroom.orchestrator.actors.launcher import ProviderAccess, process_launcher
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.campaign.coordinator import LaunchConfig, Work
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.cluster.executor import RayExecutor
from mailroom.orchestrator.cluster.local_cluster import local_cluster
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.perf.provider_standin.anthropic_standin import AnthropicStandIn
from mailroom.orchestrator.records.provider import ProviderDeclaration
from mailroom.orchestrator.sim.fake import FakeSimulator

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="an actor's network namespace needs root")

KEY = "sk-cluster-key-handed-privately-0123456789"
DECLARATION = ProviderDeclaration(
    kind="anthropic",
    key_variable="ANTHROPIC_API_KEY",
    base_url_variable="ANTHROPIC_BASE_URL",
    routes=["POST /v1/messages"],
)
CASES = [
    Case(suite=suite, task_index=0, init_state_index=0, seed=20260907)
    for suite in ("libero_spatial", "libero_goal")
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """Two nodes started before any key is set: their processes' environments lack it."""
    kept = {
        n: os.environ.pop(n) for n in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL") if n in os.environ
    }
    try:
        with local_cluster(2, 2) as made:
            yield made
    finally:
        os.environ.update(kept)


def _holding(root: Path, needle: bytes, cap: int = 64 << 20) -> list[Path]:
    found = []
    for path in root.rglob("*"):
        try:
            if path.is_file() and path.stat().st_size <= cap and needle in path.read_bytes():
                found.append(path)
        except OSError:
            continue
    return found


def test_each_worker_gateway_gets_the_key_from_the_driver_alone(
    cluster: Cluster,
    tmp_path: Path,
    module_mailbox_root: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run_dir = tmp_path / "run"
    with AnthropicStandIn() as provider:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", provider.origin)
        actor = str(copied_actor(tmp_path / "a", "gateway_client_actor.py"))
        launcher = process_launcher(
            ["{python}", actor, "{endpoint}", "answer"],
            ActorLimits(exit_window_s=5),
            confinement=ConfinementSettings(mode="sandbox", network="gateway"),
            run_dir=run_dir,
            mailbox_root=module_mailbox_root,
            provider=ProviderAccess(DECLARATION, "claude-haiku-4-5"),
        )
        settings = RunSettings(max_policy_calls=3, replan_interval=5, response_timeout_s=120.0)
        config = LaunchConfig(
            run_dir=run_dir,
            mailbox_root=module_mailbox_root,
            settings=settings,
            record="minimal",
            launcher=launcher,
            limits=ActorLimits(exit_window_s=5),
            simulator=FakeSimulator,
            slots=1,
        )
        heard: list[tuple[str, tuple[Any, ...]]] = []
        ray.init(address=cluster.address, log_to_driver=False)
        try:
            RayExecutor(cluster.address).run(
                config, [Work(case, 1) for case in CASES], 2, lambda k, p: heard.append((k, p))
            )
        finally:
            ray.shutdown()
        seen = provider.requests()
    places = [p[0] for k, p in heard if k == "worker_ready"]
    assert len({place.node_id for place in places}) == 2, heard  # one worker on each node
    results = [json.loads(p.read_text()) for p in run_dir.glob("episodes/*/result.json")]
    assert len(results) == 2
    for result in results:
        assert result["termination"] == "actor_stop", result
        assert result["usage"]["source"] == "gateway"
        assert result["usage"]["models"][0]["requests"] == 1
        assert result["confinement"] == {"mode": "sandbox", "network": "gateway"}
    assert len(seen) == 2 and {r.headers.get("x-api-key") for r in seen} == {KEY}
    assert _holding(run_dir, KEY.encode()) == []
    assert cluster.head_node is not None
    session = Path(cluster.head_node.get_session_dir_path())
    assert session.is_dir()
    assert _holding(session, KEY.encode()) == []
    assert sandbox_processes_left(run_dir) == []
