"""The report counts how each attempt was confined; runs from before confinement
existed (v1 manifests and results) still report, their attempts as not confined."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from mailroom.orchestrator.actors.confinement import confinement_of_run
from mailroom.orchestrator.records.result import EpisodeResult
from mailroom.orchestrator.records.run_directory import RunDirectory, read_result
from mailroom.orchestrator.results.export import export_parquet
from mailroom.orchestrator.results.reporter import build_report
from older_records import manifest_as, result_as_v1
from recorded_runs import make_run, write_result


def test_a_v1_result_reports_as_not_confined_beside_a_v2_one(tmp_path: Path) -> None:
    run, cases = make_run(tmp_path, proprio=False)
    write_result(run, cases[0], 1, outcome="success", executed=5, proprio=False)
    write_result(run, cases[1], 1, outcome="failure", executed=10, proprio=False)
    result_as_v1(run.episode_dir(cases[1].attempt_id(1)) / "result.json")
    old = read_result(run.episode_dir(cases[1].attempt_id(1)) / "result.json")
    assert isinstance(old, EpisodeResult) and old.confinement is None and not old.confined
    report = build_report(run.root)
    assert report.corrupt_results == []
    assert report.confinement_modes == {"external": 1, "unrecorded": 1}
    assert report.overall.not_confined == 2  # neither was confined by the sandbox
    assert report.not_confined_attempts == sorted(c.attempt_id(1) for c in cases[:2])
    assert report.overall.completed == 2
    # A v1 result does not say how its simulator was held: unknown, null in the export.
    assert report.simulators == {"dedicated": 1, "unknown": 1}
    exported = pq.read_table(export_parquet(run.root).episodes_file)
    assert exported.column("simulator").to_pylist() == ["dedicated", None]


def test_a_v1_manifest_still_reports_exports_and_types_interrupted_attempts(
    tmp_path: Path,
) -> None:
    run, cases = make_run(tmp_path, proprio=False)
    write_result(run, cases[0], 1, outcome="success", executed=5, proprio=False)
    current = run.read_manifest()
    manifest = manifest_as(
        {**current, "transport": {**current["transport"], "actor": "spawned"}}, 1
    )
    run.manifest_path.write_text(json.dumps(manifest))
    assert run.read_manifest()["confinement"] is None  # not recorded
    # Before v2 a spawned actor ran as the evaluator's own user: `none`.
    assert confinement_of_run(RunDirectory(run.root).read_manifest()).mode == "none"
    assert build_report(run.root).overall.success == 1
    summary = export_parquet(run.root)
    assert (summary.episodes, summary.steps, summary.skipped) == (1, 0, [])  # its one result
    exported = pq.read_table(summary.episodes_file).column("attempt_id").to_pylist()
    assert exported == [cases[0].attempt_id(1)]


def test_a_sandbox_whose_only_route_out_is_the_gateway_is_named_and_stays_confined(
    tmp_path: Path,
) -> None:
    """A v7 result's network may be the provider gateway: confined, and said; a v6 result
    that claims it is refused as its frozen schema refuses it (a corrupt result)."""
    run, cases = make_run(tmp_path, proprio=False)
    write_result(run, cases[0], 1, outcome="success", executed=5, proprio=False)
    write_result(run, cases[1], 1, outcome="failure", executed=10, proprio=False)
    for case, schema in (
        (cases[0], "mailroom.episode_result/v7"),
        (cases[1], "mailroom.episode_result/v6"),
    ):
        path = run.episode_dir(case.attempt_id(1)) / "result.json"
        document = json.loads(path.read_text())
        document["schema"] = schema
        document["confinement"] = {"mode": "sandbox", "network": "gateway"}
        path.write_text(json.dumps(document))
    gateway = read_result(run.episode_dir(cases[0].attempt_id(1)) / "result.json")
    assert isinstance(gateway, EpisodeResult) and gateway.confined
    refused = read_result(run.episode_dir(cases[1].attempt_id(1)) / "result.json")
    assert not isinstance(refused, EpisodeResult)
    assert "does not match mailroom.episode_result/v6" in refused.reason
    report = build_report(run.root)
    assert report.confinement_modes == {"sandbox (provider gateway)": 1}
    assert [Path(c["file"]).parent.name for c in report.corrupt_results] == [cases[1].attempt_id(1)]
    assert report.overall.not_confined == 0
