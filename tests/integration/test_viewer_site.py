"""The viewer's site from run directories made here (no simulator, no browser): what an
attempt's evidence becomes, damaged evidence, escaping, and the live server."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from dataclasses import replace
from pathlib import Path

from conftest import mailroom_exe
from mailroom.benchmarks.libero.catalog import load_catalog
from mailroom.benchmarks.libero.specs import LIBERO_ACTION, LIBERO_OBSERVATION
from mailroom.orchestrator.audit.disclosure import record_disclosure, resolve_attempt
from mailroom.orchestrator.records.result import EpisodeResult
from mailroom.orchestrator.records.run_directory import RunDirectory
from mailroom.orchestrator.results.reporter import build_report
from mailroom.orchestrator.viewer.attempt_page import attempt_page
from mailroom.orchestrator.viewer.chart import action_chart
from mailroom.orchestrator.viewer.markup import CSP
from mailroom.orchestrator.viewer.run_page import ATTEMPT_COLUMNS, attempt_row
from mailroom.orchestrator.viewer.run_shape import RunShape
from mailroom.orchestrator.viewer.site import build_site
from mailroom.orchestrator.viewer.timeline import MAX_SHOWN_BYTES, read_timeline
from older_records import result_as_v4
from recorded_runs import make_run, write_result
from served_pages import RELOADS, rebuilt_page, served_view, settled_page

LIBERO_SHAPE = RunShape.of(LIBERO_ACTION, LIBERO_OBSERVATION.cameras)


MARKUP = '<script>alert(1)</script><img src=x onerror="alert(2)">'


def _event(kind: str, **fields: object) -> str:
    return json.dumps({"t": 1.0, "event": kind, **fields}) + "\n"


def _attempt_with_markup(tmp_path: Path) -> tuple[Path, Path]:
    run, cases = make_run(tmp_path, proprio=False, run_id="run-view")
    write_result(run, cases[0], 1, outcome="success", executed=5, proprio=False)
    directory = run.episode_dir(cases[0].attempt_id(1))
    (directory / "responses").mkdir()
    (directory / "observations").mkdir()
    (directory / "responses" / "resp-1.json").write_bytes(
        json.dumps({"decision": "act", "note": MARKUP}).encode() + b"\xff\xfe"
    )
    (directory / "responses" / "resp-2.json").write_bytes(b"x" * (MAX_SHOWN_BYTES + 10))
    (directory / "actor-stdout.log").write_text(MARKUP)
    (directory / "observations" / "obs-1.json").write_text(
        json.dumps({"counters": {"policy_calls": 0, "executed_controls": 0}})
    )
    feedback = {"issues": [{"code": "stop_deferred", "message": MARKUP}]}
    (directory / "events.jsonl").write_text(
        _event("observation_published", sequence=1, image_sha256={}, feedback=None)
        + _event("response_claimed", sequence=1, outcome="accepted", decision="stop")
        + "{torn line\n"
        + _event("observation_published", sequence=2, image_sha256={}, feedback=feedback)
        + _event("response_claimed", sequence=2, outcome="invalid", reasons=["out_of_range"])
        + _event("observation_published", sequence=3, image_sha256={}, feedback=None)
        + _event("response_claimed", sequence=3, outcome="accepted", decision="act")
        + _event(
            "actions_executed",
            sequence=3,
            executed_prefix=[[0.1] * 7] * 5,
            executed_controls_total=5,
            native_success=True,
        )
        + _event(
            "decision_served",
            sequence=3,
            latency_ms=12.5,
            queue_delay_ms=0.5,
            processing_ms="not a number",
        )
    )
    return run.root, directory


def test_an_attempts_timeline_from_its_evidence_damaged_parts_said(tmp_path: Path) -> None:
    root, _ = _attempt_with_markup(tmp_path)
    (record,) = RunDirectory(root).attempts()
    timeline = read_timeline(record, LIBERO_SHAPE)
    assert [d.sequence for d in timeline.decisions] == [1, 2, 3]
    first, second, third = timeline.decisions
    assert first.verdict == "deferred stop"  # the next observation said stop_deferred
    assert first.feedback_after == {"issues": [{"code": "stop_deferred", "message": MARKUP}]}
    assert first.counters_shown == {"policy_calls": 0, "executed_controls": 0}
    assert first.response is not None and first.response.text.endswith("\ufffd\ufffd")
    assert second.verdict == "rejected" and second.reasons == ["out_of_range"]
    assert second.response is not None and second.response.truncated
    assert len(second.response.text) == MAX_SHOWN_BYTES
    assert third.native_success and third.latency_ms == 12.5 and third.processing_ms is None
    assert timeline.problems == ["events.jsonl line 3 is not JSON: left out"]
    assert timeline.first_success_control == 5


def test_the_site_escapes_what_an_actor_wrote_and_links_every_attempt(tmp_path: Path) -> None:
    root, directory = _attempt_with_markup(tmp_path)
    out = tmp_path / "site"
    summary = build_site(root, out)
    assert summary.attempts == 1 and not summary.live
    page = (out / "attempts" / directory.name / "index.html").read_text()
    assert "<script>alert" not in page and 'onerror="alert' not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count(f'content="{CSP}"') == 1
    assert re.findall(r"<script[^>]*>", page) == ['<script src="../../viewer.js" defer>']
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "first 262144 of 262154 bytes shown" in page
    index = (out / "index.html").read_text()
    assert f'href="attempts/{directory.name}/index.html"' in index
    assert "Wilson 95%" in index and "refresh" not in index
    assert "<tr><th>simulator</th><td>dedicated</td></tr>" in page
    # A second build writes nothing new.
    assert build_site(root, out).pages_written == 0


def _simulator_cells(index: str) -> dict[str, str]:
    """Each attempt's `simulator` cell in the run page's attempts table."""
    cells: dict[str, str] = {}
    for row in re.findall(r'<tr class="attempt".*?</tr>', index):
        shown = re.findall(r"<td[^>]*>(.*?)</td>", row)
        attempt = re.sub(r"<[^>]*>", "", shown[0].split("</a>")[0])
        cells[attempt] = shown[ATTEMPT_COLUMNS.index("simulator")]
    return cells


def test_how_each_attempts_simulator_was_held_is_shown_unknown_before_v5(
    tmp_path: Path,
) -> None:
    run, cases = make_run(tmp_path, proprio=False, run_id="run-held")
    parked, older = cases[0].attempt_id(1), cases[1].attempt_id(1)
    write_result(run, cases[0], 1, outcome="success", executed=5, proprio=False, simulator="parked")
    write_result(run, cases[1], 1, outcome="failure", executed=10, proprio=False)
    result_as_v4(run.episode_dir(older) / "result.json")
    out = tmp_path / "site"
    build_site(run.root, out)
    assert _simulator_cells((out / "index.html").read_text()) == {
        parked: "parked",
        older: "unknown",
    }
    shown = (out / "attempts" / parked / "index.html").read_text()
    assert "<tr><th>simulator</th><td>parked</td></tr>" in shown
    shown = (out / "attempts" / older / "index.html").read_text()
    assert "<tr><th>simulator</th><td>unknown (a result before v5 does not say)</td></tr>" in shown
    # A value outside parked, dedicated and none is never repeated, escaped or not.
    (record,) = [r for r in RunDirectory(run.root).attempts() if r.attempt_id == parked]
    timeline = read_timeline(record, LIBERO_SHAPE)
    assert isinstance(timeline.result, EpisodeResult)
    forged = replace(timeline, result=timeline.result.model_copy(update={"simulator": MARKUP}))
    assert attempt_row(forged, latest=True)["simulator"] == "unknown"
    page = attempt_page(forged, live=False)
    assert "<tr><th>simulator</th><td>unknown</td></tr>" in page
    assert "alert" not in page


def test_the_action_chart_marks_the_native_success_at_its_control() -> None:
    svg = action_chart([[0.5, -0.5, 0.0, 0.0, 0.0, 0.0, -1.0]] * 10, 7, LIBERO_SHAPE)
    assert svg.count("<polyline") == 7 and "native success (control 7)" in svg
    assert "native success" not in action_chart([[0.0] * 7] * 3, None, LIBERO_SHAPE)
    assert "no executed control" in action_chart([], None, LIBERO_SHAPE)


def test_the_served_site_rebuilds_while_a_launch_holds_the_run(tmp_path: Path) -> None:
    run, cases = make_run(tmp_path, proprio=False, kind="development", run_id="run-live")
    write_result(run, cases[0], 1, outcome="success", executed=5, proprio=False)
    with served_view(str(run.root)) as url:
        with urllib.request.urlopen(url, timeout=10) as response:
            first = response.read().decode()
            assert response.headers["Content-Security-Policy"] == CSP
            assert response.headers["Cache-Control"] == "no-store"
        assert first.count('class="attempt"') == 1 and "refresh" not in first
        with run.lock():  # as a launch holds it: the site is rebuilt and reloads itself
            write_result(run, cases[1], 1, outcome="failure", executed=10, proprio=False)
            now = rebuilt_page(
                url,
                lambda page: page.count('class="attempt"') == 2 and RELOADS in page,
                "the live site was not rebuilt",
            )
        settled_page(url, now)  # rebuilt once more once the launch ends
        outside = urllib.request.Request(url.replace("index.html", "../manifest.json"))
        try:
            with urllib.request.urlopen(outside, timeout=10) as response:
                assert b"run_id" not in response.read()
        except urllib.error.HTTPError as refused:
            assert refused.code == 404


def test_diagnostics_are_shown_apart_and_labelled_never_a_score(tmp_path: Path) -> None:
    from mailroom.orchestrator.replay.diagnostics import GoalTracker, write_diagnostics

    root, directory = _attempt_with_markup(tmp_path)
    goals = GoalTracker()
    goals.observe(0, [("on akita_black_bowl_1 plate_1", False)])
    goals.observe(5, [("on akita_black_bowl_1 plate_1", True)])
    write_diagnostics(directory, goals.diagnostics(directory.name, "reproduced"))
    done = subprocess.run(
        [mailroom_exe(), "report", str(root), "--diagnostics", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    document = json.loads(done.stdout)
    (found,) = document["diagnostics"]
    assert found["predicates"] == [
        {"predicate": "on akita_black_bowl_1 plate_1", "first_held_control": 5, "held_at_end": True}
    ]
    assert document["overall"]["success"] == 1  # the rates do not read diagnostics
    human = subprocess.run(
        [mailroom_exe(), "report", str(root), "--diagnostics"], capture_output=True, text=True
    )
    assert "post-episode diagnostics (from mailroom replay): never a score" in human.stderr
    plain = subprocess.run([mailroom_exe(), "report", str(root)], capture_output=True, text=True)
    assert "diagnostics" not in plain.stderr
    build_site(root, tmp_path / "site")
    page = (tmp_path / "site" / "attempts" / directory.name / "index.html").read_text()
    assert "Post-episode diagnostics (from mailroom replay): never a score" in page
    assert "control 5" in page


def _row_cells(index: str) -> dict[str, dict[str, str]]:
    """Each attempt's row of the run page, column by column."""
    rows: dict[str, dict[str, str]] = {}
    for row in re.findall(r'<tr class="attempt".*?</tr>', index):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
        shown = [re.sub(r"<[^>]*>", "", c) for c in cells]
        attempt = re.sub(r"<[^>]*>", "", cells[0].split("</a>")[0])
        rows[attempt] = dict(zip(ATTEMPT_COLUMNS, shown, strict=False))
    return rows


def test_each_attempt_says_whether_it_was_blinded_its_instruction_and_median_latency(
    tmp_path: Path,
) -> None:
    """What the report's "not blinded" counts, attempt by attempt: a disclosed attempt's
    row says so, beside the instruction it was handed and its median answer time."""
    run, cases = make_run(tmp_path, proprio=False, run_id="run-disclosed")
    for case in cases[:2]:
        write_result(run, case, 1, outcome="failure", executed=10, proprio=False)
    disclosed, kept = cases[0].attempt_id(1), cases[1].attempt_id(1)
    record_disclosure(run, resolve_attempt(run, disclosed), "the task name reached its actor")
    out = tmp_path / "site"
    build_site(run.root, out)
    index = (out / "index.html").read_text()
    rows = _row_cells(index)
    assert (rows[disclosed]["blinded"], rows[kept]["blinded"]) == ("no", "yes")
    entry = load_catalog().entry(cases[0].suite, cases[0].task_index)
    # The instruction is shown under the attempt's name; the case names suite, task, state.
    assert rows[disclosed]["attempt"] == disclosed + entry.instruction
    assert f'<div class="instruction">{entry.instruction}</div>' in index
    assert rows[disclosed]["case"] == f"{cases[0].suite} task {cases[0].task_index} state 0"
    assert rows[disclosed]["median latency"] == "12.5 ms"  # the result's median
    assert '<option value="no">no</option>' in index  # the blinded filter
    assert build_report(run.root).not_blinded_attempts == [disclosed]
