"""The report's denominators as the seeds name them, on real run directories (no
simulator): selected = completed + errored + unattempted, completed = success +
failure, and both success rates, in the JSON document and in the table at 80 columns."""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import mailroom_exe
from mailroom.orchestrator.campaign.interrupted import record_interrupted
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.cli.report import COLUMNS, print_report
from mailroom.orchestrator.records.result import Enforcement
from mailroom.orchestrator.records.run_directory import RunDirectory
from mailroom.orchestrator.results.reporter import Report, Tally, build_report
from older_records import result_as_v1, result_as_v4
from pydantic import ValidationError
from recorded_runs import make_run, write_result
from rich.console import Console

WIDTH = 80


def make_development_run(tmp_path: Path) -> tuple[RunDirectory, list[Case]]:
    """A run directory of the five-case development plan, as a launch leaves it."""
    return make_run(tmp_path, proprio=False, kind="development", run_id="run-denominators-test")


def _started(run: RunDirectory, case: Case, attempt: int) -> None:
    """An attempt whose actor was shown an observation, then the orchestrator stopped."""
    directory = run.episode_dir(case.attempt_id(attempt))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "events.jsonl").write_text(
        '{"t": 1788775200.0, "event": "episode_started", "settling_controls": 10}\n'
        '{"t": 1788775201.0, "event": "observation_published", "sequence": 1}\n'
    )


def render(report: Report) -> str:
    out = Console(width=WIDTH, record=True, file=io.StringIO(), color_system=None)
    print_report(report, out)
    return out.export_text()


def row(text: str, name: str) -> list[str]:
    """A table row: the suite's name, then its numbers."""
    rows = [line.split() for line in text.splitlines()]
    (found,) = [r for r in rows if r[:1] == [name] and len(r) > 1 and r[1].isdigit()]
    return found


def assert_denominators(t: Tally | dict[str, Any]) -> None:
    d = t.model_dump() if isinstance(t, Tally) else t
    assert d["selected"] == d["completed"] + d["errored"] + d["unattempted"]
    assert d["completed"] == d["success"] + d["failure"]
    assert d["corrupt"] <= d["errored"]


def assert_fits(text: str) -> None:
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= WIDTH, text
    assert "…" not in text
    # The counts' table, then the rates' with their intervals.
    counts, rates = [line for line in lines if line.split()[:1] == ["suite"]]
    assert counts.split() == ["suite", *COLUMNS]
    assert rates.split() == [
        "suite",
        "rate/sel",
        "95%",
        "interval",
        "rate/compl",
        "95%",
        "interval",
    ]
    for short in COLUMNS:
        assert any(line.startswith(short + " ") or f"; {short} " in line for line in lines)


@pytest.fixture
def five_cases(tmp_path: Path) -> tuple[RunDirectory, list[Case]]:
    """One success, one failure, one infrastructure error, one interrupted, one unattempted;
    the success's simulator was parked, the failure's result is a v4 one (which does not
    say how its simulator was held, nor what the kernel enforced), the error's and the
    interrupted one's were their own; the success's actor was held to its limits by the
    kernel, the error's and the interrupted one's (external) to none."""
    run, cases = make_development_run(tmp_path)
    assert len(cases) == 5
    held = Enforcement(memory="enforced", writable_space="kernel")
    write_result(
        run,
        cases[0],
        1,
        outcome="success",
        executed=5,
        proprio=False,
        simulator="parked",
        enforcement=held,
    )
    write_result(run, cases[1], 1, outcome="failure", executed=10, proprio=False)
    result_as_v4(run.episode_dir(cases[1].attempt_id(1)) / "result.json")
    write_result(run, cases[2], 1, outcome="error", executed=0, proprio=False)
    _started(run, cases[3], 1)
    record_interrupted(run, cases[3].attempt_id(1), reason="the orchestrator stopped")
    return run, cases


def test_selected_is_completed_plus_errored_plus_unattempted(
    five_cases: tuple[RunDirectory, list[Case]],
) -> None:
    run, _ = five_cases
    report = build_report(run.root)
    o = report.overall
    assert (o.selected, o.completed, o.errored, o.unattempted) == (5, 2, 2, 1)
    assert (o.success, o.failure, o.corrupt) == (1, 1, 0)
    assert o.selected == o.completed + o.errored + o.unattempted == 2 + 2 + 1
    assert o.completed == o.success + o.failure == 1 + 1
    assert (o.success_rate_over_selected, o.success_rate_over_completed) == (1 / 5, 1 / 2)
    assert report.suites == {"libero_10": o}
    assert not report.complete
    assert_denominators(o)


def test_the_json_document_names_both_rates(
    five_cases: tuple[RunDirectory, list[Case]],
) -> None:
    run, _ = five_cases
    done = subprocess.run(
        [mailroom_exe(), "report", str(run.root), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 4, done.stderr  # incomplete: one case unattempted
    document = json.loads(done.stdout)
    for t in (document["overall"], document["suites"]["libero_10"]):
        assert {k: t[k] for k in ("selected", "completed", "errored", "unattempted")} == {
            "selected": 5,
            "completed": 2,
            "errored": 2,
            "unattempted": 1,
        }
        assert (t["success"], t["failure"], t["corrupt"]) == (1, 1, 0)
        assert t["success_rate_over_selected"] == pytest.approx(0.2)
        assert t["success_rate_over_completed"] == pytest.approx(0.5)
        assert "success_rate" not in t
        assert_denominators(t)
    definitions = document["definitions"]
    assert "completed + errored + unattempted" in definitions["selected"]
    assert "success + failure" in definitions["completed"]
    assert document["simulators"] == {"parked": 1, "dedicated": 2, "unknown": 1}
    assert "parked" in definitions["simulators"]
    assert document["limits"] == {
        "memory": {"enforced": 1, "not enforced": 2, "unknown": 1},
        "writable_space": {"kernel": 1, "sampled": 2, "unknown": 1},
    }
    assert "mailroom.episode_result/v6" in definitions["limits"]


def test_the_table_fits_80_columns_with_both_rates(
    five_cases: tuple[RunDirectory, list[Case]],
) -> None:
    run, _ = five_cases
    text = render(build_report(run.root))
    assert_fits(text)
    # suite sel compl succ fail err unatt rate/sel rate/compl unblind unconf
    expected = ["5", "2", "1", "1", "2", "1", "20.0%", "50.0%", "0", "4"]
    assert row(text, "overall") == ["overall", *expected]
    assert row(text, "libero_10") == ["libero_10", *expected]
    # Wilson 95%: 1/5 is 3.6-62.4%, 1/2 is 9.5-90.5% (as Newcombe's formula gives them).
    assert "overall success over selected: 1/5 (20.0%, 95% interval 3.6-62.4%)\n" in text
    assert "overall success over completed: 1/2 (50.0%, 95% interval 9.5-90.5%)\n" in text
    assert "incomplete: 1 of 5 selected cases unattempted" in text
    assert "simulators: 1 parked, 2 dedicated, 1 unknown (results before v5)\n" in text
    # One line, wrapped to fit 80 columns.
    assert (
        "limits: memory enforced in 1 of 4 results; writable space bounded by the kernel "
        "in 1 of 4 (1 unknown: results before v6) "
    ) in " ".join(text.split()) + " "


def test_the_command_prints_the_same_table_in_an_80_column_terminal(
    five_cases: tuple[RunDirectory, list[Case]],
) -> None:
    run, _ = five_cases
    env = {**os.environ, "COLUMNS": str(WIDTH)}
    done = subprocess.run(
        [mailroom_exe(), "report", str(run.root)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 4 and done.stdout == ""  # human output is on stderr
    assert_fits(done.stderr)
    assert row(done.stderr, "overall")[7:9] == ["20.0%", "50.0%"]


def test_worker_lost_and_corrupt_are_errored_v1_still_counts(tmp_path: Path) -> None:
    run, cases = make_development_run(tmp_path)
    _started(run, cases[0], 1)
    record_interrupted(run, cases[0].attempt_id(1), reason="worker died", kind="worker_lost")
    write_result(run, cases[1], 1, outcome="failure", executed=10, proprio=False)
    result_as_v1(run.episode_dir(cases[1].attempt_id(1)) / "result.json")
    write_result(run, cases[2], 1, outcome="success", executed=5, proprio=False)
    corrupt = run.episode_dir(cases[2].attempt_id(1)) / "result.json"
    corrupt.write_bytes(corrupt.read_bytes()[:80])  # cut mid-document
    write_result(run, cases[3], 1, outcome="error", executed=0, proprio=False)
    write_result(run, cases[3], 2, outcome="success", executed=5, proprio=False)  # rerun
    _started(run, cases[4], 1)  # shown an observation, no result document yet

    # While a launch holds the run, that attempt is in progress: unattempted so far.
    with run.lock():
        live = build_report(run.root).overall
    assert (live.errored, live.unattempted, live.in_progress, live.unrecorded) == (2, 1, 1, 0)
    assert_denominators(live)
    # With no launch running it was interrupted: errored, before any resume records it.
    report = build_report(run.root)
    o = report.overall
    assert (o.selected, o.completed, o.errored, o.unattempted) == (5, 2, 3, 0)
    assert (o.success, o.failure, o.corrupt, o.unrecorded, o.in_progress) == (1, 1, 1, 1, 0)
    assert "1 errored cases were interrupted before a result was written" in " ".join(
        render(report).split()
    )
    assert o.selected == o.completed + o.errored + o.unattempted
    assert o.completed == o.success + o.failure
    assert (o.success_rate_over_selected, o.success_rate_over_completed) == (1 / 5, 1 / 2)
    assert [c["file"] for c in report.corrupt_results] == [str(corrupt)]
    assert report.superseded_attempts == [cases[3].attempt_id(1)]
    assert report.confinement_modes == {"external": 2, "unrecorded": 1}  # corrupt: unknown
    assert report.simulators == {"dedicated": 2, "unknown": 1}  # the v1 result's: unknown
    assert "simulators: 2 dedicated, 1 unknown (results before v5)" in render(report)
    assert "corrupt result, counted as errored" in " ".join(render(report).split())

    # A resume records the corrupt attempt as interrupted: the counts do not move.
    record_interrupted(run, cases[2].attempt_id(1), reason="the orchestrator stopped")
    again = build_report(run.root).overall
    assert (again.completed, again.errored, again.corrupt, again.unattempted) == (2, 3, 0, 0)
    assert_denominators(again)


def _tally(success: int, failure: int, errored: int, unattempted: int) -> Tally:
    completed = success + failure
    selected = completed + errored + unattempted
    return Tally(
        selected=selected,
        completed=completed,
        success=success,
        failure=failure,
        errored=errored,
        unattempted=unattempted,
        not_blinded=errored,
        not_confined=selected,
        success_rate_over_selected=success / selected,
        success_rate_over_completed=success / completed,
    )


def test_long_suite_names_and_large_counts_still_fit() -> None:
    suites = {
        "libero_spatial_object": _tally(1234, 4000, 1000, 266),
        "libero_10": _tally(7, 2, 1, 0),
    }
    overall = _tally(1241, 4002, 1001, 266)
    report = Report(
        run_id="run-wide",
        profile="anonymous_code_agent",
        capability_score=True,
        plan_kind="canonical",
        complete=False,
        overall=overall,
        suites=suites,
        corrupt_results=[],
        superseded_attempts=[],
        not_blinded_attempts=[],
        not_confined_attempts=[],
        confinement_modes={},
    )
    text = render(report)
    assert_fits(text)
    assert "simulators: no result yet\n" in text  # a report made without the count
    assert row(text, "overall")[1:9] == [
        *("6510", "5243", "1241", "4002", "1001", "266"),
        *("19.1%", "23.7%"),
    ]


def test_a_tally_whose_denominators_do_not_add_up_is_refused() -> None:
    good = _tally(1, 1, 2, 1).model_dump()
    Tally.model_validate(good)
    for broken in (
        {"selected": 6},  # selected != completed + errored + unattempted
        {"completed": 3, "selected": 6},  # completed != success + failure
        {"corrupt": 3},  # more corrupt than errored
        {"success_rate_over_selected": 0.5},  # a rate that does not match its counts
        # an interval that does not match its counts
        {"success_rate_over_selected_interval": {"low": 0.0, "high": 1.0}},
    ):
        with pytest.raises(ValidationError):
            Tally.model_validate({**good, **broken})


def test_a_corrupt_results_reason_is_shown_as_text_never_as_markup(tmp_path: Path) -> None:
    run, cases = make_development_run(tmp_path)
    write_result(run, cases[0], 1, outcome="success", executed=5, proprio=False)
    report = build_report(run.root)
    tricky = {"file": "[bold]result.json", "reason": "closing [/red] and [link=x]y[/link]"}
    shown = " ".join(render(report.model_copy(update={"corrupt_results": [tricky]})).split())
    assert "[bold]result.json: closing [/red] and [link=x]y[/link]" in shown
