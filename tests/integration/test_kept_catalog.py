"""A run's kept catalog, read one way by every command that reads the run (no simulator).

A LIBERO-Para run keeps the catalog of the copy it was planned on. Read later without
the copy (a published run), a case that left no usable result is named only by that
kept catalog: report, view, export and compare all name its paraphrase cell, never
"unknown"; a kept file that disagrees with the manifest is refused by each.
"""

from __future__ import annotations

import json
from pathlib import Path

import kept_catalog_runs
import pyarrow.parquet as pq
import pytest
from conftest import mailroom_exe
from kept_catalog_runs import CELLS, para_run
from mailroom.benchmarks.libero_para.local_copy import (
    PARA_CATALOG_FILE,
)
from mailroom.orchestrator.families.kept import KeptCatalogError
from mailroom.orchestrator.results.comparison import compare_runs
from mailroom.orchestrator.results.export import ExportError, export_parquet
from mailroom.orchestrator.results.reporter import build_report
from mailroom.orchestrator.viewer.site import build_site

# A fixture of tests/support, used by name.
undeclared = kept_catalog_runs.undeclared


@pytest.mark.usefixtures("undeclared")
def test_report_view_export_and_compare_name_cells_by_the_kept_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cases = para_run(tmp_path, monkeypatch, "para-a")
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
    para_run(tmp_path, monkeypatch, "para-a")
    para_run(tmp_path, monkeypatch, "para-b")
    comparison = compare_runs(tmp_path / "para-a", tmp_path / "para-b")
    assert set(comparison.groups) == {f"libero_para/{cell}" for cell in CELLS}


@pytest.mark.usefixtures("undeclared")
def test_a_kept_catalog_that_disagrees_with_the_manifest_is_refused_by_every_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    para_run(tmp_path, monkeypatch, "para-a")
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
