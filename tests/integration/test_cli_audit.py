"""`mailroom audit`, `disclose` and `cutover` through the installed executable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from audit_runs import RunBuilder
from conftest import assert_usage_error, mailroom_exe, run_cli
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.audit.verdict import AUDIT_SCHEMA
from mailroom.orchestrator.campaign.coordinator import schedule
from mailroom.orchestrator.families.plans import build_plan
from recorded_events import run_events


def _json(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(proc.stdout)  # stdout is the document alone
    return document


@pytest.fixture
def fast(tmp_path_factory: pytest.TempPathFactory) -> RunBuilder:
    builder = RunBuilder(tmp_path_factory.mktemp("cli"), build_plan("fast"))
    for case in builder.cases:
        builder.attempt(case)
    return builder


def test_audit_of_a_clean_run_exits_0(fast: RunBuilder) -> None:
    proc = run_cli("audit", str(fast.run_dir), "--json")
    assert proc.returncode == 0, proc.stderr
    verdict = _json(proc)
    assert schema_errors(AUDIT_SCHEMA, verdict) == []
    assert verdict["clean"] is True and verdict["leaks"] == [] and verdict["unverifiable"] == []
    assert verdict["attempts_scanned"] == 2
    assert json.loads((fast.run_dir / "audit.json").read_text()) == verdict
    human = run_cli("audit", str(fast.run_dir))
    assert human.returncode == 0 and "clean" in human.stderr and human.stdout == ""
    assert [(e["clean"], e["leaks"]) for e in run_events(fast.run_dir, "audited")] == [
        (True, 0)
    ] * 2


def test_audit_with_leaks_exits_6_and_lists_them(fast: RunBuilder) -> None:
    attempt_id = fast.cases[1].attempt_id(1)
    endpoint = json.loads((fast.run.episode_dir(attempt_id) / "endpoint.json").read_text())
    scratch = Path(endpoint["endpoint"]) / "scratch"
    (scratch / "notes.md").write_text("this is libero_10, seed 20260907")
    proc = run_cli("audit", str(fast.run_dir), "--json")
    assert proc.returncode == 6, proc.stderr
    verdict = _json(proc)
    assert verdict["clean"] is False and verdict["unverifiable"] == []
    assert {(x["attempt_id"], x["where"]) for x in verdict["leaks"]} == {
        (attempt_id, "scratch/notes.md")
    }
    assert {x["identifier_kind"] for x in verdict["leaks"]} == {"suite", "seed"}
    assert {x["source"] for x in verdict["leaks"]} == {"actor_written"}
    # The benchmark's name an actor wrote itself is information, listed apart.
    assert [(x["where"], x["kind"]) for x in verdict["information"]] == [
        ("scratch/notes.md", "benchmark")
    ]
    human = run_cli("audit", str(fast.run_dir))
    assert human.returncode == 6
    assert attempt_id in human.stderr and "scratch/notes.md" in human.stderr
    assert "2 leaks" in human.stderr and "1 information finding" in human.stderr
    event = run_events(fast.run_dir, "audited")[-1]
    assert (event["leaks"], event["information"]) == (2, 1)


def _endpoint(fast: RunBuilder, attempt_id: str) -> Path:
    mapping = json.loads((fast.run.episode_dir(attempt_id) / "endpoint.json").read_text())
    return Path(mapping["endpoint"])


def _table_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line[:1] in set("┏┃┡│└━┗╇")]


def test_audit_with_only_information_exits_0_and_shows_it_apart(fast: RunBuilder) -> None:
    """What agent CLIs write themselves: today's date in their state, their guess of the
    benchmark in their notes. Every name and excerpt shows as written, never as markup."""
    today = fast.manifest["volatile"]["created_at"]
    first, second = (fast.cases[i].attempt_id(1) for i in (0, 1))
    for attempt_id in (first, second):
        state = json.dumps({"firstStartTime": today, "userID": "0" * 64})
        (_endpoint(fast, attempt_id) / "scratch" / ".claude.json").write_text(state)
    (_endpoint(fast, first) / "scratch" / "[b]x.md").write_text("[red]LIBERO[/red] scene")
    proc = run_cli("audit", str(fast.run_dir), "--json")
    assert proc.returncode == 0, proc.stderr
    verdict = _json(proc)
    assert schema_errors(AUDIT_SCHEMA, verdict) == []
    assert verdict["clean"] is True and verdict["leaks"] == [] and verdict["unverifiable"] == []
    assert sorted((x["attempt_id"], x["where"], x["kind"]) for x in verdict["information"]) == [
        (first, "scratch/.claude.json", "date"),
        (first, "scratch/[b]x.md", "benchmark"),
        (second, "scratch/.claude.json", "date"),
    ]
    assert json.loads((fast.run_dir / "audit.json").read_text()) == verdict
    human = run_cli("audit", str(fast.run_dir))
    assert human.returncode == 0 and human.stdout == ""
    assert "information" in human.stderr and "clean" in human.stderr
    assert "[b]x.md" in human.stderr and "[red]LIBERO[/red]" in human.stderr
    assert "3 information findings in 2 attempts" in human.stderr
    assert "beyond what it can know untold" in human.stderr
    table = _table_lines(human.stderr)
    assert table and all(len(line) <= 80 for line in table)  # even on a 200-column terminal
    # One row per place: the state file of both attempts is one row.
    assert sum(".claude.json" in line for line in table) == 1
    narrow = subprocess.run(
        [mailroom_exe(), "audit", str(fast.run_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "80"},  # rich wraps cells to the terminal width
    )
    assert narrow.returncode == 0
    assert all(len(line) <= 80 for line in narrow.stderr.splitlines())


def test_a_date_handed_to_the_actor_fails_the_audit(fast: RunBuilder) -> None:
    attempt_id = fast.cases[0].attempt_id(1)
    day = fast.manifest["volatile"]["created_at"][:10]
    (_endpoint(fast, attempt_id) / "outbox" / f"frame-{day}.txt").write_text("")
    proc = run_cli("audit", str(fast.run_dir), "--json")
    assert proc.returncode == 6, proc.stderr
    leaks = _json(proc)["leaks"]
    assert [(x["where"], x["identifier_kind"], x["source"]) for x in leaks] == [
        (f"outbox/frame-{day}.txt", "date", "handed")
    ]


def test_audit_with_a_vanished_endpoint_and_no_leak_exits_4(fast: RunBuilder) -> None:
    shutil.rmtree(fast.mailbox_root)
    proc = run_cli("audit", str(fast.run_dir), "--json")
    assert proc.returncode == 8, proc.stderr
    verdict = _json(proc)
    assert verdict["leaks"] == [] and verdict["clean"] is False
    assert len(verdict["unverifiable"]) == 2
    human = run_cli("audit", str(fast.run_dir))
    assert human.returncode == 8 and "unverifiable" in human.stderr


def test_audit_of_something_that_is_not_a_run_is_a_usage_error(tmp_path: Path) -> None:
    assert_usage_error(run_cli("audit", str(tmp_path), "--json"), "not a run directory")
    assert_usage_error(run_cli("audit", str(tmp_path / "absent")), "not a run directory")


def test_disclose_marks_the_attempt_not_blinded_in_the_report(fast: RunBuilder) -> None:
    case = fast.cases[0]
    attempt_id = case.attempt_id(1)
    before = _json(run_cli("report", str(fast.run_dir), "--json"))
    assert before["overall"]["not_blinded"] == 0 and before["not_blinded_attempts"] == []
    proc = run_cli("disclose", str(fast.run_dir), case.case_id, "--note", "task name in the chat")
    assert proc.returncode == 0, proc.stderr
    assert attempt_id in proc.stderr
    report = run_cli("report", str(fast.run_dir), "--json")
    assert report.returncode == 0, report.stderr
    after = _json(report)
    assert after["overall"]["not_blinded"] == 1
    assert after["suites"]["libero_10"]["not_blinded"] == 1
    assert after["not_blinded_attempts"] == [attempt_id]
    assert after["overall"]["completed"] == 2  # kept in the results
    (event,) = run_events(fast.run_dir, "leak_disclosed")
    assert (event["attempt_id"], event["case_id"], event["note"]) == (
        attempt_id,
        case.case_id,
        "task name in the chat",
    )
    assert isinstance(event["t"], float) and event["at"].endswith("Z")
    lines = (fast.run.episode_dir(attempt_id) / "disclosures.jsonl").read_text().splitlines()
    assert [json.loads(line)["note"] for line in lines] == ["task name in the chat"]


def test_disclosing_twice_is_recorded_twice_and_counted_once(fast: RunBuilder) -> None:
    attempt_id = fast.cases[1].attempt_id(1)
    for note in ("first notice", "second notice"):
        proc = run_cli("disclose", str(fast.run_dir), attempt_id, "--note", note)
        assert proc.returncode == 0, proc.stderr
    assert [e["note"] for e in run_events(fast.run_dir, "leak_disclosed")] == [
        "first notice",
        "second notice",
    ]
    lines = (fast.run.episode_dir(attempt_id) / "disclosures.jsonl").read_text().splitlines()
    assert len(lines) == 2
    report = _json(run_cli("report", str(fast.run_dir), "--json"))
    assert report["overall"]["not_blinded"] == 1
    assert report["not_blinded_attempts"] == [attempt_id]


def test_a_case_id_means_its_latest_attempt(fast: RunBuilder) -> None:
    case = fast.cases[0]
    fast.attempt(case, attempt=2)
    proc = run_cli("disclose", str(fast.run_dir), case.case_id, "--note", "seen")
    assert proc.returncode == 0, proc.stderr
    assert [e["attempt_id"] for e in run_events(fast.run_dir, "leak_disclosed")] == [
        case.attempt_id(2)
    ]
    assert not (fast.run.episode_dir(case.attempt_id(1)) / "disclosures.jsonl").exists()


def test_a_disclosed_errored_attempt_is_never_rerun(fast: RunBuilder) -> None:
    case = fast.cases[0]
    fast.attempt(case, attempt=2, outcome="error")
    assert run_cli("disclose", str(fast.run_dir), case.case_id, "--note", "seen").returncode == 0
    plan = schedule(fast.cases, fast.run, rerun_errored=True)
    assert [w.case.case_id for w in plan.work] == []
    assert case.attempt_id(2) in {r.attempt_id for r in plan.already_done}


def test_disclosing_an_unknown_case_is_a_usage_error_and_records_nothing(
    fast: RunBuilder,
) -> None:
    events = (fast.run_dir / "events.jsonl").read_bytes()
    assert_usage_error(
        run_cli("disclose", str(fast.run_dir), "libero_10-t009-i00-o0-s20260907", "--note", "x"),
        "'libero_10-t009-i00-o0-s20260907' is neither an attempt of this run nor a case",
    )
    assert_usage_error(
        run_cli("disclose", str(fast.run_dir), "nonsense-a9", "--note", "x"), "neither"
    )
    assert_usage_error(
        run_cli("disclose", str(fast.run_dir), fast.cases[0].case_id, "--note", " "), "--note"
    )
    assert (fast.run_dir / "events.jsonl").read_bytes() == events
    assert list(fast.run_dir.glob("episodes/*/disclosures.jsonl")) == []


def test_cutover_is_an_event_and_leaves_the_manifest_byte_identical(fast: RunBuilder) -> None:
    manifest = (fast.run_dir / "manifest.json").read_bytes()
    plan = (fast.run_dir / "plan.json").read_bytes()
    note = "from now on actors get no display label; earlier attempts unchanged"
    proc = run_cli("cutover", str(fast.run_dir), "--note", note)
    assert proc.returncode == 0, proc.stderr
    assert (fast.run_dir / "manifest.json").read_bytes() == manifest
    assert (fast.run_dir / "plan.json").read_bytes() == plan
    (event,) = run_events(fast.run_dir, "operator_cutover")
    assert event["note"] == note and event["at"].endswith("Z")
    assert_usage_error(
        run_cli("cutover", str(fast.run_dir.parent), "--note", note), "not a run directory"
    )
