"""The run directory's names and its one event-log reader (orchestrator/records/).

The names are pinned here as runs have always written them: a run written before the
layout had one home must still read, so a changed name is a broken reader, not a rename.
"""

from __future__ import annotations

import json
from pathlib import Path

from mailroom.orchestrator.records.event_log import event_line, logged_disclosure, read_log
from mailroom.orchestrator.records.layout import RunPaths, attempt_id_of, split_attempt_id
from mailroom.orchestrator.records.run_directory import RunDirectory


def test_a_run_and_an_attempt_keep_their_files_where_runs_always_did(tmp_path: Path) -> None:
    run = RunPaths(tmp_path)
    named = {
        run.manifest: "manifest.json",
        run.plan: "plan.json",
        run.events: "events.jsonl",
        run.audit: "audit.json",
        run.lock: ".lock",
        run.episodes: "episodes",
    }
    assert {p.relative_to(tmp_path).as_posix(): n for p, n in named.items()} == {
        n: n for n in named.values()
    }
    attempt = run.attempt("libero_10-t000-i00-o0-s7-a2")
    assert attempt.root == tmp_path / "episodes" / "libero_10-t000-i00-o0-s7-a2"
    assert attempt.attempt_id == "libero_10-t000-i00-o0-s7-a2"
    files = {
        attempt.result: "result.json",
        attempt.corrupt_result: "result.corrupt.json",
        attempt.events: "events.jsonl",
        attempt.steps: "steps.jsonl",
        attempt.endpoint_mapping: "endpoint.json",
        attempt.launch_message: "launch_message.json",
        attempt.disclosures: "disclosures.jsonl",
        attempt.diagnostics: "diagnostics.json",
        attempt.observation(3): "observations/obs-3.json",
        attempt.observation_image(3, "agentview"): "observations/obs-3-agentview.png",
        attempt.response(3): "responses/resp-3.json",
        attempt.video("agentview"): "videos/agentview.mp4",
        attempt.actor_output["stdout"]: "actor-stdout.log",
        attempt.actor_output["stderr"]: "actor-stderr.log",
    }
    assert {attempt.relative(p): n for p, n in files.items()} == {n: n for n in files.values()}


def test_an_attempt_id_reads_back_as_its_case_and_number() -> None:
    case_id = "libero_goal-t003-i12-o0-s42"
    assert attempt_id_of(case_id, 1) == f"{case_id}-a1"
    assert split_attempt_id(attempt_id_of(case_id, 17)) == (case_id, 17)
    # A case id may itself hold "-a": the number is what follows the last one.
    assert split_attempt_id("x-alpha-a3") == ("x-alpha", 3)
    for not_an_attempt in ("plan.json", "case-a", "case-ax", "case"):
        assert split_attempt_id(not_an_attempt) is None


def test_a_torn_last_line_leaves_everything_before_it(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_text(
        event_line("episode_started", settling_controls=10)
        + "[1, 2]\n"
        + event_line("response_claimed", sequence=1)
        + '{"t": 1.0, "event": "actions_exec'
    )
    read = read_log(log)
    assert [r["event"] for r in read.records] == ["episode_started", "response_claimed"]
    assert [(u.number, u.why) for u in read.unreadable] == [
        (2, "is not an object"),
        (4, "is not JSON"),
    ]
    assert [r["event"] for r in read.before_first_unreadable()] == ["episode_started"]


def test_reading_only_some_kinds_passes_over_the_rest(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_text(
        event_line("actor_started", argv=["actor"])
        + "not json, and no kind named\n"
        + event_line("decision_served", sequence=1, latency_ms=5.0)
        + json.dumps({"event": "observation_published", "note": '"actor_started"'})
        + "\n"
    )
    started = read_log(log, kinds=("actor_started",))
    assert [r["argv"] for r in started.records] == [["actor"]]
    assert started.unreadable == ()  # the line naming no wanted kind is never parsed
    assert read_log(tmp_path / "missing.jsonl").records == []


def test_an_attempt_that_announced_an_observation_may_have_been_seen(tmp_path: Path) -> None:
    run = RunDirectory(tmp_path)
    paths = run.paths.attempt(attempt_id_of("case", 1))
    paths.root.mkdir(parents=True)
    assert not logged_disclosure(paths.events)
    paths.events.write_text(event_line("episode_started"))
    assert not logged_disclosure(paths.events)
    with paths.events.open("a") as log:
        log.write(event_line("first_observation_publishing", request_id="r") + '{"torn')
    assert logged_disclosure(paths.events)
    (record,) = run.attempts()
    assert record.actor_saw_anything()
