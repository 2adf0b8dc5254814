"""A run's kept catalog, read one way by every command that reads the run (no simulator).

A LIBERO-Para run keeps the catalog of the copy it was planned on. Read later without
the copy (a published run), a case that left no usable result is named only by that
kept catalog: report, view, export and compare all name its paraphrase cell, never
"unknown"; a kept file that disagrees with the manifest is refused by each.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest
import test_export
from conftest import mailroom_exe
from mailroom.benchmarks.libero_para.family import LIBERO_PARA
from mailroom.benchmarks.libero_para.local_copy import (
    PARA_CATALOG_FILE,
)
from mailroom.orchestrator.actors.confinement import ConfinementSettings
from mailroom.orchestrator.campaign.manifest import build_manifest
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.plans import render_plan
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.families.kept import KeptCatalogError, keep_run_catalog
from mailroom.orchestrator.families.plans import build_plan
from mailroom.orchestrator.families.registry import catalog_entry
from mailroom.orchestrator.records.run_directory import RunDirectory
from mailroom.orchestrator.results.comparison import compare_runs
from mailroom.orchestrator.results.export import ExportError, export_parquet
from mailroom.orchestrator.results.reporter import build_report
from mailroom.orchestrator.viewer.site import build_site
from para_copy import make_para_copy
from test_export import write_result

CELLS = ("action_synonym", "object_descriptive")


@pytest.fixture
def undeclared() -> Iterator[None]:
    """Whatever a test declares or pins, nothing stays declared or pinned after it."""
    yield
    LIBERO_PARA.source.declare(None)


def _para_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> list[Case]:
    """A LIBERO-Para run as a launch with external actors leaves it: manifest, plan and
    kept catalog; case 0 (action_synonym) succeeded, case 2 (object_descriptive) left
    a result file that cannot be read (errored, named by the kept catalog alone), the
    other two unattempted. The copy is gone afterwards, as for a published run."""
    copy = tmp_path / f"{name}-copy"
    make_para_copy(copy, goal_tasks=(0, 1))
    LIBERO_PARA.declare_local_copy(copy)
    plan = build_plan("task_coverage", suite="libero_para", task_ids=[0, 1])
    cases = plan.to_cases()
    run = RunDirectory(tmp_path / name)
    manifest = build_manifest(
        run_id=name,
        plan_sha256=plan.plan_sha256,
        plan_kind=plan.kind,
        n_cases=len(cases),
        profile_name="scripted_diagnostic",
        profile_declaration={"profile": "scripted_diagnostic", "capability_score": False},
        settings=RunSettings(proprio=False),
        actor_command=None,
        record="full",
        run_dir=run.root,
        mailbox_root=tmp_path / "mailboxes",
        workers=1,
        confinement=ConfinementSettings(mode="external"),
        benchmark="libero_para",
    )
    run.write_manifest(manifest)
    run.plan_path.write_bytes(render_plan(plan))
    keep_run_catalog(run.root, "libero_para")
    run.event("launched", volatile=manifest["volatile"])
    cells = [catalog_entry(c.suite, c.task_index).cell for c in cases]  # type: ignore[attr-defined]
    assert cells == [CELLS[0], CELLS[0], CELLS[1], CELLS[1]], cells
    # The shared result writer reads entries from whichever catalog holds the suite.
    monkeypatch.setattr(test_export, "load_catalog", lambda: SimpleNamespace(entry=catalog_entry))
    write_result(run, cases[0], 1, outcome="success", executed=5, proprio=False)
    broken = run.episode_dir(cases[2].attempt_id(1))
    broken.mkdir(parents=True)
    (broken / "result.json").write_text("{", encoding="utf-8")
    # Read elsewhere: no copy declared, nothing pinned but what a command pins itself.
    for path in copy.rglob("*.bddl"):
        path.unlink()
    LIBERO_PARA.source.declare(None)
    return cases


@pytest.mark.usefixtures("undeclared")
def test_report_view_export_and_compare_name_cells_by_the_kept_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cases = _para_run(tmp_path, monkeypatch, "para-a")
    run = tmp_path / "para-a"
    expected = {f"libero_para/{cell}" for cell in CELLS}

    report = build_report(run)
    assert set(report.categories) == expected
    assert report.categories["libero_para/object_descriptive"].errored == 1

    site = build_site(run, tmp_path / "site")
    page = (site.out / "index.html").read_text(encoding="utf-8")
    for key in expected:  # a long name may break after its suite's slash
        assert f"<td>{key.replace('/', '/<wbr>')}</td>" in page, key
    assert "libero_para/unknown" not in page

    summary = export_parquet(run, tmp_path / "export")
    episodes = pq.read_table(summary.episodes_file).to_pylist()
    assert [(e["case_id"], e["group"]) for e in episodes] == [(cases[0].case_id, "action_synonym")]

    comparison = compare_runs(run, run)
    assert set(comparison.groups) == expected
    # The unreadable result is errored in both runs: paired, and named by its cell.
    assert comparison.groups["libero_para/object_descriptive"].paired == 1
    assert comparison.groups["libero_para/action_synonym"].both_succeeded == 1


@pytest.mark.usefixtures("undeclared")
def test_compare_names_each_runs_cells_by_its_own_kept_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _para_run(tmp_path, monkeypatch, "para-a")
    _para_run(tmp_path, monkeypatch, "para-b")
    comparison = compare_runs(tmp_path / "para-a", tmp_path / "para-b")
    assert set(comparison.groups) == {f"libero_para/{cell}" for cell in CELLS}


@pytest.mark.usefixtures("undeclared")
def test_a_kept_catalog_that_disagrees_with_the_manifest_is_refused_by_every_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    _para_run(tmp_path, monkeypatch, "para-a")
    run = tmp_path / "para-a"
    kept = run / PARA_CATALOG_FILE
    document = json.loads(kept.read_text(encoding="utf-8"))
    document["revision"] = "another"
    kept.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(KeptCatalogError, match="does not hash to"):
        build_report(run)
    with pytest.raises(KeptCatalogError, match="does not hash to"):
        build_site(run, tmp_path / "site")
    with pytest.raises(ExportError, match="does not hash to"):
        export_parquet(run, tmp_path / "export")
    with pytest.raises(KeptCatalogError, match="does not hash to"):
        compare_runs(run, run)
    for command in (["report"], ["view"], ["export"], ["audit"], ["replay"]):
        done = subprocess.run(
            [mailroom_exe(), *command, str(run)], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2, (command, done.stderr)
        assert "does not hash to" in " ".join(done.stderr.split()), (command, done.stderr)
        assert "Traceback" not in done.stderr
