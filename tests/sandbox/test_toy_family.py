"""A benchmark family mailroom has never heard of, installed for real as its own
distribution (`tests/support/toy_family`: a tiny catalog and a fake simulator, its own private
names), registers through the `mailroom.benchmarks` entry-point group; then `mailroom
catalog`, `plan`, `launch` (its sandboxed diagnostic actor), `report`, `audit`, `view`
and `replay` run it with no edit to mailroom, and the audit flags its private names.

The family run here is `toyreach`: an action of another dimension, bounds and
controller (mailbox protocol v2) and one camera. Its sibling `toyworld` (LIBERO's action
dimension under names of its own, one camera) is what the export, viewer and record
tests launch.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import toy_family_runs
from conftest import run_cli
from mailroom.mailbox.schemas import schema_errors
from toy_family_runs import TOY, TOYREACH_SUITE, plan_toy


def _toy_guide() -> str:
    """The family's own guide, read from its source (the family is installed only into
    the environment its commands run in)."""
    spec = importlib.util.spec_from_file_location(
        "toy_family_source", TOY / "mailroom_toy_family" / "__init__.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    guide: str = module.TOYREACH_GUIDE
    return guide


TOY_GUIDE = _toy_guide()
TASK_NAMES = (
    "TOYTABLE_SCENE3_push_the_amber_puck_to_the_line",
    "TOYTABLE_SCENE3_lift_the_pear_off_the_table",
)
SUITE = TOYREACH_SUITE

# Fixtures of tests/support, used by name.
toy_env = toy_family_runs.toy_env
toy_run = toy_family_runs.toy_run


def test_the_toy_family_is_unknown_without_its_distribution() -> None:
    proc = run_cli("catalog", "--benchmark", "toyreach")
    assert proc.returncode == 2 and "Invalid value" in proc.stderr


def test_catalog_and_plan_come_from_the_toy_family(toy_env: dict[str, str], tmp_path: Path) -> None:
    shown = run_cli("catalog", "--benchmark", "toyreach", "--json", env=toy_env)
    assert shown.returncode == 0, shown.stderr
    assert [e["task_name"] for e in json.loads(shown.stdout)["entries"]] == list(TASK_NAMES)
    plan = tmp_path / "plan.json"
    plan_toy(plan, SUITE, toy_env)
    document = json.loads(plan.read_text(encoding="utf-8"))
    assert document["schema"] == "mailroom.plan/v3" and document["benchmark"] == "toyreach"
    assert {c["benchmark"] for c in document["cases"]} == {"toyreach"}


def test_launch_and_report_run_the_toy_family(toy_env: dict[str, str], toy_run: Path) -> None:
    manifest = json.loads((toy_run / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["schema"] == "mailroom.run_manifest/v8"
    assert manifest["protocol"]["benchmark"] == "toyreach"
    assert manifest["protocol"]["adapter"] == "toy_fake"
    assert manifest["confinement"]["mode"] == "sandbox"
    # The family's own shape, from its declaration to what its actor was handed.
    protocol = manifest["protocol"]
    assert (protocol["cameras"], protocol["image_size"]) == (["overhead"], 64)
    assert protocol["settling_controls"] == 2
    assert protocol["camera_transform"] == "none"
    attempt = sorted((toy_run / "episodes").iterdir())[0]
    result = json.loads((attempt / "result.json").read_text(encoding="utf-8"))
    assert result["settings"]["settling_controls"] == 2
    first = json.loads((attempt / "observations" / "obs-1.json").read_text("utf-8"))
    assert list(first["images"]) == ["overhead"]
    assert (first["images"]["overhead"]["width"], first["images"]["overhead"]["height"]) == (64, 64)
    # Four numbers in [-2, 2] for a velocity controller: protocol v2 carries them, the
    # instructions describe v2 and hand over the family's guide.
    assert first["schema"] == "mailroom.observation/v2"
    assert first["action_spec"] == {
        "dimension": 4,
        "low": -2.0,
        "high": 2.0,
        "layout": ["vx", "vy", "vz", "grip"],
        "controller": "velocity",
        "control_hz": 10,
        "replan_interval": first["action_spec"]["replan_interval"],
        "max_chunk": first["action_spec"]["max_chunk"],
    }
    assert schema_errors("mailroom.observation/v2", first) == []
    assert protocol["mailbox_protocol"] == "mailroom.observation/v2 + mailroom.response/v2"
    assert manifest["blinding"]["instructions_version"] == "v3"
    assert result["instructions_version"] == "v3"
    guide = TOY_GUIDE.encode()
    assert protocol["actor_guide_sha256"] == hashlib.sha256(guide).hexdigest()
    message = json.loads((attempt / "launch_message.json").read_text("utf-8"))
    assert TOY_GUIDE in message["instructions"] and "{actor_guide}" not in message["instructions"]
    assert result["counters"]["rejected_responses"] == 0, result["counters"]
    assert result["counters"]["action_decisions"] >= 1
    response = json.loads((attempt / "responses" / "resp-1.json").read_text("utf-8"))
    assert response["schema"] == "mailroom.response/v2" and len(response["actions"][0]) == 4
    report = run_cli("report", str(toy_run), "--json", env=toy_env)
    assert report.returncode == 0, report.stderr
    document: dict[str, Any] = json.loads(report.stdout)
    assert document["complete"] and document["suites"][SUITE]["success"] == 2
    # Without the family installed, the run's manifest names a family this
    # installation does not know: export refuses it.
    export = run_cli("export", str(toy_run), "--out", str(toy_run.parent / "x.parquet"))
    assert export.returncode != 0 and "no benchmark family 'toyreach'" in export.stderr
    # With it, the export lays the steps out as the family declares them.
    out = toy_run.parent / "export"
    exported = run_cli("export", str(toy_run), "--out", str(out), env=toy_env)
    assert exported.returncode == 0, exported.stderr
    steps = pq.read_schema(out / "steps.parquet")
    layout = json.loads(steps.metadata[b"mailroom"])
    assert layout["fps"] == 10 and layout["cameras"] == ["overhead"]
    assert layout["action_names"] == ["vx", "vy", "vz", "grip"]


def test_view_and_replay_the_toy_run(toy_env: dict[str, str], toy_run: Path) -> None:
    site = toy_run.parent / "site"
    viewed = run_cli("view", str(toy_run), "--out", str(site), env=toy_env)
    assert viewed.returncode == 0, viewed.stderr
    assert SUITE in (site / "index.html").read_text(encoding="utf-8")
    pages = [p.read_text(encoding="utf-8") for p in (site / "attempts").glob("*/index.html")]
    assert pages and all("overhead at observation 1" in p for p in pages)
    assert not any("agentview" in p for p in pages)
    assert all(">vx</text>" in p and ">grip</text>" in p for p in pages)  # the action chart
    replayed = run_cli("replay", str(toy_run), env=toy_env)
    assert replayed.returncode == 0, replayed.stderr
    assert "reproduced 2, diverged 0, not_replayable 0" in replayed.stdout + replayed.stderr


def test_the_audit_flags_the_toy_familys_private_names(
    toy_env: dict[str, str], toy_run: Path, module_mailbox_root: Path
) -> None:
    clean = run_cli("audit", str(toy_run), env=toy_env)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    endpoints = sorted((module_mailbox_root / "toy").iterdir())
    endpoint = endpoints[0]
    # What the evaluator hands (outbox/) names the family, a task and a scene file; what
    # the actor writes itself names a task.
    (endpoint / "outbox" / "extra.txt").write_text(
        "a toyreach task: toytable_scene3_push_the_amber_puck_to_the_line.toyscene\n"
        f"{TASK_NAMES[0]}\n",
        encoding="utf-8",
    )
    (endpoint / "scratch" / "notes.txt").write_text(f"notes: {TASK_NAMES[1]}\n", encoding="utf-8")
    try:
        audited = run_cli("audit", str(toy_run), "--json", env=toy_env)
        assert audited.returncode != 0
        verdict = json.loads(audited.stdout)
        found = {(f["identifier_kind"], f["source"]) for f in verdict["leaks"]}
        assert {
            ("benchmark", "handed"),
            ("task_name", "handed"),
            ("bddl_file", "handed"),
            ("task_name", "actor_written"),
        } <= found
        assert not verdict["clean"]
    finally:
        (endpoint / "outbox" / "extra.txt").unlink()
        (endpoint / "scratch" / "notes.txt").unlink()


def test_the_sandbox_hides_the_toy_familys_package(toy_env: dict[str, str]) -> None:
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "from mailroom.orchestrator.actors.hidden_paths import evaluator_paths\n"
            "print('\\n'.join(str(p) for p in evaluator_paths()))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=toy_env,
        check=True,
    )
    hidden = [Path(line) for line in probe.stdout.splitlines()]
    assert any(p.name == "mailroom_toy_family" for p in hidden), hidden
