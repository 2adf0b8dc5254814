"""`mailroom catalog` and `mailroom plan` through the installed executable."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_usage_error, run_cli
from mailroom.benchmarks.libero.catalog import catalog_sha256, load_catalog
from mailroom.orchestrator.families.plans import load_plan

ENTRY_FIELDS = {"suite", "task_index", "task_name", "instruction", "horizon", "horizon_source"}


@pytest.fixture(scope="module")
def catalog_json() -> dict[str, Any]:
    proc = run_cli("catalog", "--json")
    assert proc.returncode == 0, proc.stderr
    document: dict[str, Any] = json.loads(proc.stdout)  # stdout is the document alone
    return document


def test_catalog_json_lists_130_standard_entries_then_the_pro_family(
    catalog_json: dict[str, Any],
) -> None:
    entries = catalog_json["entries"]
    assert catalog_json["catalog_sha256"] == catalog_sha256()
    assert all(set(e) >= ENTRY_FIELDS for e in entries)
    standard = entries[:130]
    assert {e["benchmark"] for e in standard} == {"libero"}
    assert Counter(e["suite"] for e in standard) == {
        "libero_spatial": 10,
        "libero_object": 10,
        "libero_goal": 10,
        "libero_90": 90,
        "libero_10": 10,
    }
    assert [(e["suite"], e["task_index"]) for e in standard] == [
        (e.suite, e.task_index) for e in load_catalog().entries[:130]
    ]
    pro = entries[130:]
    assert len(pro) == 160 and {e["benchmark"] for e in pro} == {"libero_pro"}
    assert len({e["suite"] for e in pro}) == 16
    libero_10 = [e for e in standard if e["suite"] == "libero_10"]
    assert [e["task_index"] for e in libero_10] == list(range(10))
    assert {(e["horizon"], "StarVLA" in e["horizon_source"]) for e in libero_10} == {(520, True)}
    assert catalog_json["native_lifelong_horizon"]["controls"] == 600


def test_catalog_filters_by_suite_and_benchmark() -> None:
    proc = run_cli("catalog", "--json", "--benchmark", "libero_pro")
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["entries"]) == 160
    proc = run_cli("catalog", "--json", "--suite", "libero_10_lan")
    entries = json.loads(proc.stdout)["entries"]
    assert [e["task_index"] for e in entries] == list(range(10))
    assert entries[0]["instruction"] == load_catalog().entry("libero_10_lan", 0).bddl_language
    assert entries[0]["horizon"] == 520


def test_catalog_table_is_human_output_on_stderr() -> None:
    proc = run_cli("catalog", "--suite", "libero_goal")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert "open the middle drawer of the cabinet" in proc.stderr
    assert "300" in proc.stderr


def test_catalog_refuses_bad_filters() -> None:
    assert_usage_error(run_cli("catalog", "--suite", "libero_11"), "unknown suite 'libero_11'")
    assert_usage_error(
        run_cli("catalog", "--suite", "libero_10", "--benchmark", "libero_pro"),
        "not in benchmark 'libero_pro'",
    )
    assert_usage_error(run_cli("catalog", "--benchmark", "libero_91"), "Invalid value")
    assert_usage_error(
        run_cli("catalog", "--suite", "libero_10", "--category", "camera"),
        "--category selects LIBERO-Plus tasks",
    )


def test_plan_canonical_libero_spatial_is_500_interleaved_cases(tmp_path: Path) -> None:
    out = tmp_path / "canonical.json"
    proc = run_cli(
        "plan", "--kind", "canonical", "--suite", "libero_spatial", "--out", str(out), "--json"
    )
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert json.loads(out.read_text(encoding="utf-8")) == document
    cases = document["cases"]
    assert len(cases) == 500
    assert [(c["task_index"], c["init_state_index"]) for c in cases] == [
        (t, s) for s in range(50) for t in range(10)
    ]
    assert {(c["seed"], c["task_order_index"], c["benchmark"]) for c in cases} == {(7, 0, "libero")}
    assert document["canonical_protocol"] is True
    assert "CANONICAL" in proc.stderr
    assert load_plan(out).plan_sha256 == document["plan_sha256"]


def test_plan_kinds_through_the_cli(tmp_path: Path) -> None:
    expected = {
        ("fast",): [("libero_10", 0), ("libero_10", 1)],
        ("development",): [("libero_10", i) for i in range(5)],
        ("task_coverage", "--suite", "libero_goal", "--task-ids", "9,0"): [
            ("libero_goal", 9),
            ("libero_goal", 0),
        ],
    }
    for n, (args, pairs) in enumerate(expected.items()):
        out = tmp_path / f"p{n}.json"
        proc = run_cli("plan", "--kind", *args, "--out", str(out))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == ""
        plan = load_plan(out)
        assert [(c.suite, c.task_index) for c in plan.cases] == pairs
        assert {(c.init_state_index, c.seed, c.task_order_index) for c in plan.cases} == {
            (0, 20260907, 0)
        }
    proc = run_cli("plan", "--kind", "all", "--out", str(tmp_path / "all.json"))
    assert proc.returncode == 0, proc.stderr
    assert len(load_plan(tmp_path / "all.json").cases) == 130
    proc = run_cli(
        "plan",
        "--kind",
        "canonical",
        "--suite",
        "libero_10_task",
        "--out",
        "pro.json",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    pro = load_plan(tmp_path / "pro.json")
    assert pro.benchmark == "libero_pro" and len(pro.cases) == 500


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kind", "canonical"], "needs a suite"),
        (["--kind", "canonical", "--suite", "libero_11"], "unknown suite 'libero_11'"),
        (
            ["--kind", "task_coverage", "--suite", "libero_10", "--task-ids", "0,10"],
            "no task index 10",
        ),
        (
            ["--kind", "task_coverage", "--suite", "libero_10", "--task-ids", "0,x"],
            "comma-separated",
        ),
        (["--kind", "task_coverage", "--suite", "libero_10"], "explicit suite and task ids"),
        (["--kind", "all", "--suite", "libero_10"], "takes no suite"),
        (["--kind", "retry"], "Invalid value for '--kind'"),
    ],
)
def test_plan_refuses_bad_input_with_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "plan.json"
    assert_usage_error(run_cli("plan", *args, "--out", str(out)), message)
    assert not out.exists()


def test_plan_refuses_to_replace_a_different_plan(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    assert run_cli("plan", "--kind", "fast", "--out", str(out)).returncode == 0
    assert run_cli("plan", "--kind", "fast", "--out", str(out)).returncode == 0
    assert_usage_error(
        run_cli("plan", "--kind", "development", "--out", str(out)), "already exists"
    )
    assert load_plan(out).kind == "fast"
    assert run_cli("plan", "--kind", "development", "--out", str(out), "--force").returncode == 0
    assert load_plan(out).kind == "development"
    assert_usage_error(run_cli("plan", "--kind", "fast"), "Missing option '--out'")
