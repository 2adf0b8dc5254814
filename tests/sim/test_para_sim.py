"""A LIBERO-Para paraphrase through the mailbox on the real simulator.

The copy is made from the installed LIBERO-Goal files (`para_copy.py`); the plan, the
launch, the report and the audit are the commands a user runs.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import cli_plan, launch_command, mailroom_exe
from mailroom.benchmarks.libero.catalog import load_catalog
from mailroom.benchmarks.libero_para.local_copy import (
    PARA_CATALOG_FILE,
    PARA_DIR_VARIABLE,
    para_catalog_sha256,
    parse_para_catalog,
    read_para_copy,
)
from para_copy import make_para_copy

DIAGNOSTIC = "agents/scripted_diagnostic/actor.py"


def test_a_paraphrase_runs_its_goal_scene_and_delivers_the_paraphrase(
    tmp_path: Path, mailbox_root: Path, repo: Path
) -> None:
    copy = tmp_path / "LIBERO-Para"
    expected = make_para_copy(copy, goal_tasks=(0,))
    plan = cli_plan(
        tmp_path / "para.json", "fast", "--suite", "libero_para", "--para-dir", str(copy)
    )
    run_dir = tmp_path / "run"
    actor = f"/usr/bin/python3 {repo / DIAGNOSTIC} {{endpoint}} --chunks 2"
    env = {k: v for k, v in os.environ.items() if k != PARA_DIR_VARIABLE}
    launched = subprocess.run(
        launch_command(
            plan, run_dir, mailbox_root, actor, "--workers", "1", "--para-dir", str(copy)
        ),
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert launched.returncode == 0, launched.stderr[-3000:]
    catalog = read_para_copy(copy)
    goal = load_catalog().entry("libero_goal", 0)
    # The run keeps the copy's catalog; the plan and the manifest name it by its hash.
    kept = parse_para_catalog((run_dir / PARA_CATALOG_FILE).read_bytes())
    assert kept == catalog
    manifest = json.loads((run_dir / "manifest.json").read_text())
    plan_document = json.loads(plan.read_text())
    assert (
        manifest["protocol"]["catalog_sha256"]
        == plan_document["catalog_sha256"]
        == para_catalog_sha256(catalog)
    )
    episodes = sorted(run_dir.glob("episodes/libero_para-*"))
    assert len(episodes) == 2
    delivered = set()
    for episode in episodes:
        result = json.loads((episode / "result.json").read_text())
        assert result["outcome"] in ("success", "failure")
        entry = catalog.entry(result["case"]["task_index"])
        assert result["case"]["task_name"] == entry.task_name
        assert result["case"]["bddl_sha256"] == goal.bddl_sha256  # the Goal task's scene
        assert result["case"]["instruction"] == entry.instruction
        observation = json.loads((episode / "observations" / "obs-1.json").read_text())
        assert observation["instruction"] == expected[entry.para_path] != goal.instruction
        delivered.add(observation["instruction"])
    assert len(delivered) == 2
    report = subprocess.run(
        [mailroom_exe(), "report", str(run_dir), "--json"], capture_output=True, text=True, env=env
    )
    assert report.returncode == 0, report.stderr
    cells = json.loads(report.stdout)["categories"]
    assert set(cells) == {"libero_para/action_synonym", "libero_para/object_descriptive"}
    assert all(t["selected"] == 1 and t["completed"] == 1 for t in cells.values())
    human = subprocess.run(
        [mailroom_exe(), "report", str(run_dir)],
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "80"},
    )
    assert "action_synonym" in human.stderr + human.stdout
    audit = subprocess.run(
        [mailroom_exe(), "audit", str(run_dir), "--para-dir", str(copy)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr
    # A published run re-proves without the data set: the catalog it kept suffices.
    moved = copy.rename(tmp_path / "gone")
    replayed = subprocess.run(
        [mailroom_exe(), "replay", str(run_dir)], capture_output=True, text=True, env=env
    )
    assert replayed.returncode == 0, replayed.stdout[-2000:] + replayed.stderr[-2000:]
    assert "reproduced 2" in replayed.stdout + replayed.stderr
    assert moved.is_dir()
