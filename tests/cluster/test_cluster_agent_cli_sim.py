"""Claude Code on a real Ray cluster started here (a head and a second node, one slot
each): `mailroom launch --profile claude_code --executor ray` runs two LIBERO episodes,
each worker checking that its node's agent CLI installation is the run's and running its
own provider gateway, the real CLI in its sandbox reaching the stand-in provider on the
host's 127.0.0.1 only through that gateway. The nodes were started before the key was
set: it reaches the workers through the driver's call alone, and is nowhere in the run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import cli_plan, mailroom_exe, sandbox_processes_left
from mailroom.orchestrator.actors.agent_installation import installed_versions
from mailroom.orchestrator.cluster.local_cluster import local_cluster
from mailroom.orchestrator.perf.provider_standin.anthropic_standin import AnthropicStandIn
from mailroom.orchestrator.perf.provider_standin.driver import DriverSettings

pytest.importorskip("ray")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="an actor's network namespace needs root")

ACT_DECISIONS = 2
KEY = "sk-standin-ray-0123456789abcdef-never-written"
MODEL = "standin-claude-model"


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    assert "ANTHROPIC_API_KEY" not in os.environ
    with local_cluster(2, 1) as made:
        yield str(made.address)


def test_claude_code_episodes_run_on_the_ray_workers_through_their_gateways(
    cluster: str, tmp_path: Path, module_mailbox_root: Path
) -> None:
    plan = cli_plan(
        tmp_path / "plan.json", "task_coverage", "--suite", "libero_spatial", "--task-ids", "0,1"
    )
    run_dir = tmp_path / "run"
    with AnthropicStandIn(DriverSettings(act_decisions=ACT_DECISIONS)) as provider:
        env = {**os.environ, "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": provider.origin}
        launched = subprocess.run(
            [
                *(mailroom_exe(), "launch", str(plan), "--profile", "claude_code"),
                *("--model", MODEL, "--run-dir", str(run_dir)),
                *("--mailbox-root", str(module_mailbox_root), "--max-policy-calls", "6"),
                *("--response-timeout", "180", "--record", "minimal"),
                *("--executor", "ray", "--ray-address", cluster, "--workers", "2"),
                *("--slots", "1"),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
        )
        requests = provider.requests()
    assert launched.returncode == 0, launched.stderr[-3000:]
    nodes = set(re.findall(r"Ray node ([0-9a-f]+)", launched.stdout + launched.stderr))
    assert len(nodes) == 2, launched.stdout + launched.stderr  # a worker on each node

    manifest = json.loads((run_dir / "manifest.json").read_text())
    packages = manifest["environment"]["packages"]
    assert {k: v for k, v in packages.items() if k.startswith("npm:")} == installed_versions()
    results = [json.loads(p.read_text()) for p in sorted(run_dir.glob("episodes/*/result.json"))]
    assert len(results) == 2
    for result in results:
        assert result["counters"]["action_decisions"] >= ACT_DECISIONS, result
        assert result["counters"]["rejected_responses"] == 0, result
        assert result["confinement"] == {"mode": "sandbox", "network": "gateway"}
        assert result["usage"]["source"] == "gateway" and result["usage"]["failed_requests"] == 0
        assert result["usage"]["declared_model"] == MODEL
    # Every request the CLIs made reached the stand-in through a gateway, with the key.
    assert sum(r["usage"]["provider_requests"] for r in results) == len(requests)
    assert {r.headers.get("x-api-key") for r in requests} == {KEY}
    assert [p for p in run_dir.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()] == []
    assert sandbox_processes_left(run_dir) == []
