"""`mailroom launch --executor ray` of a LIBERO-Para plan on the real simulator, on a real
Ray cluster started here (a head and a second node, Ray's own cluster utilities): the
run's kept catalog reaches each Ray worker inside its work, and each observation
delivers its paraphrase on its LIBERO-Goal scene.

The cluster's processes are started before the copy is declared; the launch is the
command a user runs, with `--para-dir` for the driver alone.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import cli_plan, launch_command, mailroom_exe
from mailroom.benchmarks.libero.catalog import load_catalog
from mailroom.benchmarks.libero_para.local_copy import (
    PARA_CATALOG_FILE,
    PARA_DIR_VARIABLE,
    parse_para_catalog,
    read_para_copy,
)
from mailroom.orchestrator.cluster.local_cluster import local_cluster
from para_copy import make_para_copy
from recorded_events import run_events

ray = pytest.importorskip("ray")

DIAGNOSTIC = "agents/scripted_diagnostic/actor.py"


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A head node and one more node process, each with 1 slot and 1 CPU."""
    assert PARA_DIR_VARIABLE not in os.environ
    with local_cluster(2, 1) as made:
        yield str(made.address)


def test_a_para_plan_on_ray_delivers_each_paraphrase_on_its_goal_scene(
    cluster: str, tmp_path: Path, mailbox_root: Path, repo: Path
) -> None:
    copy = tmp_path / "LIBERO-Para"
    expected = make_para_copy(copy, goal_tasks=(0,))
    env = {k: v for k, v in os.environ.items() if k != PARA_DIR_VARIABLE}
    plan = cli_plan(
        tmp_path / "para.json", "fast", "--suite", "libero_para", "--para-dir", str(copy)
    )
    run_dir = tmp_path / "run"
    actor = f"/usr/bin/python3 {repo / DIAGNOSTIC} {{endpoint}} --chunks 2"
    launched = subprocess.run(
        launch_command(
            plan,
            run_dir,
            mailbox_root,
            actor,
            *("--executor", "ray", "--ray-address", cluster, "--workers", "2"),
            *("--max-policy-calls", "3", "--para-dir", str(copy)),
        ),
        capture_output=True,
        text=True,
        timeout=1200,
        env=env,
    )
    assert launched.returncode == 0, launched.stderr[-3000:]
    assert [e["executor"] for e in run_events(run_dir, "launched")] == ["ray"]
    catalog = read_para_copy(copy)
    assert parse_para_catalog((run_dir / PARA_CATALOG_FILE).read_bytes()) == catalog
    goal = load_catalog().entry("libero_goal", 0)
    episodes = sorted(run_dir.glob("episodes/libero_para-*"))
    assert len(episodes) == 2
    delivered = set()
    for episode in episodes:
        result = json.loads((episode / "result.json").read_text())
        assert result["errors"] == [] and result["outcome"] in ("success", "failure"), result
        entry = catalog.entry(result["case"]["task_index"])
        assert result["case"]["task_name"] == entry.task_name
        assert result["case"]["bddl_sha256"] == goal.bddl_sha256  # the Goal task's scene
        observation = json.loads((episode / "observations" / "obs-1.json").read_text())
        assert observation["instruction"] == expected[entry.para_path] != goal.instruction
        delivered.add(observation["instruction"])
    assert len(delivered) == 2
    report = subprocess.run(
        [mailroom_exe(), "report", str(run_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert report.returncode == 0, report.stderr
    assert set(json.loads(report.stdout)["categories"]) == {
        "libero_para/action_synonym",
        "libero_para/object_descriptive",
    }
