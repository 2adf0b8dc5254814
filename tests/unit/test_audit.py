"""The blinding audit over run directories built with the orchestrator's own modules.

Runs are real files in real temporary directories: a manifest and plan, per attempt the
private evidence (endpoint.json, launch_message.json, events, result) and a real opaque
endpoint with published observations, PNG frames, the actor's responses and scratch.
No simulator is involved.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from audit_runs import (
    CAMERAS,
    FRAME,
    BuiltAttempt,
    RunBuilder,
)
from conftest import REPO
from mailroom.benchmarks.libero.catalog import load_catalog
from mailroom.mailbox.publish import document_bytes, publish_bytes
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.audit.endpoint_walk import source_of
from mailroom.orchestrator.audit.patterns import (
    Identifiers,
    build_identifiers,
    launch_identifiers,
    path_disclosures,
)
from mailroom.orchestrator.audit.scan import NotARunDirectoryError, audit_run, scan_run
from mailroom.orchestrator.audit.verdict import AuditError, read_verdict
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.episode.evidence import EpisodeEvidence
from mailroom.orchestrator.families.plans import build_plan
from mailroom.orchestrator.records.audit_verdict import AUDIT_SCHEMA, AuditVerdict
from mailroom.orchestrator.records.layout import AUDIT_FILE
from pydantic import ValidationError

Hit = tuple[str, str, str]


@pytest.fixture
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # A neutral parent: the mailbox root's path is part of what an actor is given.
    return tmp_path_factory.mktemp("audit")


@pytest.fixture
def fast(base: Path) -> RunBuilder:
    return RunBuilder(base, build_plan("fast"))


def hits(verdict: AuditVerdict) -> set[Hit]:
    return {(x.attempt_id, x.where, x.identifier_kind) for x in verdict.leaks}


def kinds_at(verdict: AuditVerdict, where: str) -> set[str]:
    return {x.identifier_kind for x in verdict.leaks if x.where == where}


def informed(verdict: AuditVerdict) -> set[Hit]:
    """What the actors wrote that they could know untold: never failing."""
    return {(x.attempt_id, x.where, x.kind) for x in verdict.information or []}


def sources_at(verdict: AuditVerdict, where: str) -> set[str | None]:
    return {x.source for x in verdict.leaks if x.where == where}


def checked(verdict: AuditVerdict) -> AuditVerdict:
    assert schema_errors(AUDIT_SCHEMA, verdict.document()) == []
    return verdict


# --- clean runs ---------------------------------------------------------------------------


def test_a_run_written_like_the_orchestrator_writes_it_is_clean_and_recorded(
    fast: RunBuilder,
) -> None:
    for case in fast.cases:
        fast.attempt(case)
    verdict = checked(audit_run(fast.run_dir))
    assert verdict.clean and verdict.leaks == [] and verdict.unverifiable == []
    assert verdict.run_id == "campaign-q3-alpha"
    assert verdict.attempts_scanned == 2
    # per attempt: 2 observations, 4 frames, 2 responses, closed.json, scratch/notes.txt
    assert verdict.files_scanned == 2 * 10
    recorded = json.loads((fast.run_dir / AUDIT_FILE).read_text())
    assert recorded == verdict.document()
    assert schema_errors(AUDIT_SCHEMA, recorded) == []
    audited = [e for e in fast.run.events() if e["event"] == "audited"]
    assert [(e["clean"], e["leaks"], e["unverifiable"]) for e in audited] == [(True, 0, 0)]


def test_a_run_named_with_a_word_of_the_shared_instructions_is_still_clean(base: Path) -> None:
    """`run` occurs in the instructions every actor gets: it cannot be searched for."""
    builder = RunBuilder(base, build_plan("fast"), run_id="run", dir_name="run")
    built = builder.attempt(builder.cases[0])
    assert " run " in built.instructions()
    assert checked(scan_run(builder.run_dir)).clean


def test_the_delivered_instruction_is_public_but_a_task_name_is_not(fast: RunBuilder) -> None:
    built = fast.attempt(fast.cases[0])
    entry = load_catalog().entry(built.case.suite, built.case.task_index)
    assert built.observation(1)["instruction"] == entry.instruction
    built.write("scratch/plan.txt", f"goal: {entry.instruction}\nGOAL: {entry.instruction.upper()}")
    assert checked(scan_run(fast.run_dir)).clean
    built.write("scratch/plan.txt", f"goal: {entry.task_name}")
    assert hits(scan_run(fast.run_dir)) == {(built.attempt_id, "scratch/plan.txt", "task_name")}


def test_no_catalog_instruction_looks_like_a_private_identifier() -> None:
    catalog = load_catalog()
    cases = [
        Case(suite=e.suite, task_index=e.task_index, init_state_index=i, seed=seed)
        for e in catalog.entries
        for i, seed in ((0, 20260907), (3, 7))
    ]
    identifiers = build_identifiers(
        run_names={"run_id": "run-20260907T101500Z-5c2e"},
        cases=cases,
        case_ids=[c.case_id for c in cases],
        created_at="2026-09-07T10:15:00Z",
    )
    for entry in catalog.entries:
        for written_by_actor in (False, True):
            found = list(
                identifiers.find(
                    entry.instruction, instruction=None, actor_written=written_by_actor
                )
            )
            assert found == [], (entry.suite, entry.task_index, found)


def test_an_actor_may_spell_its_own_instruction_as_a_task_name_would(base: Path) -> None:
    """libero_goal names are the instruction with underscores: nothing private in the
    actor's own notes; the orchestrator never writes such a name, and another task's
    name, or a name that differs from the instruction it was given, is private."""
    plan = build_plan("task_coverage", suite="libero_goal", task_ids=[0, 1])
    builder = RunBuilder(base, plan)
    built = builder.attempt(builder.cases[0])
    own, other = (load_catalog().entry("libero_goal", i).task_name for i in (0, 1))
    assert own == "open_the_middle_drawer_of_the_cabinet"
    built.write(f"scratch/{own}.md", own)
    assert checked(scan_run(builder.run_dir)).clean
    built.plant_observation(1, {"note": own})
    built.write(f"scratch/{other}.md", "x")
    assert hits(scan_run(builder.run_dir)) == {
        (built.attempt_id, "outbox/obs-1.json", "task_name"),
        (built.attempt_id, f"scratch/{other}.md", "task_name"),
    }


def test_a_perturbed_task_name_is_private_even_where_it_resembles_the_instruction(
    base: Path,
) -> None:
    entry = load_catalog().entry("libero_object_task", 7)
    assert entry.task_name.replace("_", " ") != entry.instruction  # milk vs butter
    plan = build_plan("task_coverage", suite="libero_object_task", task_ids=[7])
    builder = RunBuilder(base, plan)
    built = builder.attempt(builder.cases[0])
    built.write("scratch/notes.md", entry.task_name)
    assert (built.attempt_id, "scratch/notes.md", "task_name") in hits(scan_run(builder.run_dir))


# --- leaks of each kind, in each place ---------------------------------------------------


def _run_date(builder: RunBuilder) -> str:
    y, m, d = builder.manifest["volatile"]["created_at"][:10].split("-")
    return f"{d}.{m}.{y}"


PLANTED: list[tuple[str, Callable[[RunBuilder, BuiltAttempt], dict[str, Any]]]] = [
    ("run_id", lambda b, a: {"note": f"part of {b.run_id}"}),
    ("run_directory", lambda b, a: {"note": f"saved under {b.run_dir}"}),
    ("case_id", lambda b, a: {"note": a.attempt_id}),
    ("case_id", lambda b, a: {"request_id": a.attempt_id}),
    ("benchmark", lambda b, a: {"note": "a LIBERO-PRO scene"}),
    ("suite", lambda b, a: {"note": "from the libero_spatial set"}),
    ("task_name", lambda b, a: {"note": load_catalog().entry("libero_10", 1).task_name}),
    ("task_name", lambda b, a: {"note": "living_room_scene2"}),
    ("bddl_file", lambda b, a: {"note": "problem file scene.bddl"}),
    ("seed", lambda b, a: {"note": 20260907}),
    ("seed", lambda b, a: {"rng": "seed=20260907"}),
    ("init_state_index", lambda b, a: {"note": "restored initial state 0"}),
    ("init_state_index", lambda b, a: {"init_state_index": 0}),
    ("private_key", lambda b, a: {"bddl": "kitchen"}),
    ("private_key", lambda b, a: {"Suite": "kitchen"}),
    ("date", lambda b, a: {"note": "captured 2031-01-02"}),
    ("date", lambda b, a: {"note": "frame_20310102T0900"}),
    ("date", lambda b, a: {"note": f"run of {_run_date(b)}"}),
]


@pytest.mark.parametrize(("kind", "payload"), PLANTED)
def test_each_kind_of_identifier_planted_in_an_observation_is_found(
    fast: RunBuilder,
    kind: str,
    payload: Callable[[RunBuilder, BuiltAttempt], dict[str, Any]],
) -> None:
    built, _other = (fast.attempt(case) for case in fast.cases)
    built.plant_observation(2, payload(fast, built))
    verdict = checked(scan_run(fast.run_dir))
    assert not verdict.clean
    assert kind in kinds_at(verdict, "outbox/obs-2.json")
    assert {x.attempt_id for x in verdict.leaks} == {built.attempt_id}
    assert all(len(x.excerpt) <= 200 and x.excerpt.isascii() for x in verdict.leaks)


def test_a_bddl_file_name_and_a_suite_in_a_png_name_are_found(fast: RunBuilder) -> None:
    built = fast.attempt(fast.cases[0])
    bddl = load_catalog().entry("libero_10", 0).bddl_path.rsplit("/", 1)[1]
    built.write(f"outbox/{bddl}.png", FRAME)
    built.write("scratch/libero_10-frame.png", FRAME)
    found = hits(scan_run(fast.run_dir))
    assert {(built.attempt_id, f"outbox/{bddl}.png", k) for k in ("bddl_file", "task_name")} <= (
        found
    )
    assert (built.attempt_id, "scratch/libero_10-frame.png", "suite") in found


def _with_chunk(png: bytes, kind: bytes, data: bytes) -> bytes:
    """`png` with one more chunk before IEND."""
    crc = struct.pack(">I", zlib.crc32(kind + data))
    chunk = struct.pack(">I", len(data)) + kind + data + crc
    iend = png.rindex(b"IEND") - 4
    return png[:iend] + chunk + png[iend:]


def test_png_pixels_are_never_read_but_png_text_chunks_are(fast: RunBuilder) -> None:
    built = fast.attempt(fast.cases[0])
    private = b"libero_10 20260907"
    built.write("scratch/a.png", _with_chunk(FRAME, b"prVt", private))
    assert checked(scan_run(fast.run_dir)).clean
    built.write("scratch/b.png", _with_chunk(FRAME, b"tEXt", b"Comment\0" + private))
    compressed = b"Comment\0\0" + zlib.compress(private)
    built.write("scratch/c.png", _with_chunk(FRAME, b"zTXt", compressed))
    verdict = scan_run(fast.run_dir)
    # The actor wrote them: the benchmark's name is information, the suite and seed leak.
    for where in ("scratch/b.png", "scratch/c.png"):
        assert kinds_at(verdict, where) == {"suite", "seed"}
        assert (built.attempt_id, where, "benchmark") in informed(verdict)


def test_what_an_actor_wrote_into_scratch_and_inbox_counts(fast: RunBuilder) -> None:
    built = fast.attempt(fast.cases[0])
    built.write("scratch/notes.md", "the suite is libero_10")
    built.write("scratch/libero/empty.txt", "")
    built.write("inbox/.resp-3.json.tmp", '{"note": "seed 20260907"}')
    verdict = scan_run(fast.run_dir)
    found = hits(verdict)
    assert (built.attempt_id, "scratch/notes.md", "suite") in found
    excerpts = {x.excerpt for x in verdict.leaks if x.where == "scratch/notes.md"}
    assert excerpts == {"the suite is libero_10"}
    # A folder named for the benchmark tells the actor's own guess, nothing it was told.
    assert (built.attempt_id, "scratch/libero", "benchmark") in informed(verdict)
    assert not any(where == "scratch/libero" for _, where, _ in found)
    assert (built.attempt_id, "inbox/.resp-3.json.tmp", "seed") in found
    assert not any(where == "scratch/libero/empty.txt" for _, where, _ in found)
    assert {x.source for x in verdict.leaks} == {"actor_written"}
    assert not checked(verdict).clean


def test_instructions_that_name_the_task_are_a_leak(fast: RunBuilder) -> None:
    built = fast.attempt(fast.cases[0])
    task_name = load_catalog().entry("libero_10", 0).task_name
    text = built.instructions() + f"\nYour task: {task_name} (seed 20260907)\n"
    (built.directory / "launch_message.json").write_text(json.dumps({"instructions": text}))
    assert {"task_name", "seed"} <= kinds_at(scan_run(fast.run_dir), "instructions")


def test_argv_and_environment_are_searched(fast: RunBuilder) -> None:
    built = fast.attempt(fast.cases[0])
    argv = ["/usr/bin/python3", "actor.py", str(built.endpoint.root), "--seed", "20260907"]
    built.replace_events(
        {"event": "actor_started", "detail": f"ActorProcess(pid=7, argv={argv!r})"}
    )
    assert kinds_at(scan_run(fast.run_dir), "argv") == {"seed"}
    # Recorded with structure (argv and env fields), they are read as such.
    built.replace_events(
        {
            "event": "actor_started",
            "detail": "ActorProcess(pid=7)",
            "argv": ["actor", "--label", fast.run_id],
            "env": {"PATH": "/usr/bin", "HOME": str(built.endpoint.scratch), "RUN": "x"},
        }
    )
    assert kinds_at(scan_run(fast.run_dir), "argv") == {"run_id"}
    assert kinds_at(scan_run(fast.run_dir), "env") == set()
    # A structured environment is searched value by value.
    built.replace_events(
        {
            "event": "actor_started",
            "argv": ["actor"],
            "env": {"PATH": "/usr/bin", "HOME": str(built.endpoint.scratch), "HINT": "libero_10"},
        }
    )
    assert {"suite", "benchmark"} <= kinds_at(scan_run(fast.run_dir), "env")
    # A repr that cannot be parsed is searched whole.
    built.replace_events({"event": "actor_started", "detail": "Actor(libero_10, argv=?)"})
    assert {"suite", "benchmark"} <= kinds_at(scan_run(fast.run_dir), "argv")


def test_a_mailbox_root_named_with_a_date_leaks_through_instructions_argv_and_env(
    base: Path,
) -> None:
    builder = RunBuilder(base, build_plan("fast"), mailbox_name="mb-2031-01-02")
    built = builder.attempt(builder.cases[0])
    verdict = checked(scan_run(builder.run_dir))
    for where in ("instructions", "argv", "env", "endpoint"):
        assert (built.attempt_id, where, "date") in hits(verdict)
    assert {x.source for x in verdict.leaks} == {"handed"}
    assert verdict.information == []


def test_symlinks_are_reported_by_target_and_never_followed(fast: RunBuilder) -> None:
    built = fast.attempt(fast.cases[0])
    os.symlink(fast.run_dir / "manifest.json", built.endpoint.scratch / "link")
    verdict = scan_run(fast.run_dir)
    # The target path names the run directory; the manifest's contents (which name the
    # benchmark) were not read through the link.
    assert kinds_at(verdict, "scratch/link") == {"run_directory"}


def test_a_fifo_in_scratch_does_not_hang_the_audit(fast: RunBuilder) -> None:
    built = fast.attempt(fast.cases[0])
    os.mkfifo(built.endpoint.scratch / "pipe")
    verdict = scan_run(fast.run_dir)
    assert verdict.clean and verdict.files_scanned == 11


# --- what was handed, and what the actor wrote itself -------------------------------------


def _created(builder: RunBuilder) -> str:
    """The run's creation time: the day an actor of the run learns from its provider."""
    created: str = builder.manifest["volatile"]["created_at"]
    return created


def test_a_date_and_the_benchmarks_name_an_actor_wrote_are_information_not_leaks(
    fast: RunBuilder,
) -> None:
    """An agent CLI's own state (today's date from its provider) and its own notes (it
    recognised a LIBERO scene) tell nothing the evaluator disclosed."""
    built, other = (fast.attempt(case) for case in fast.cases)
    today = _created(fast)
    state = {"firstStartTime": today, "libero_guess": True, "numStartups": 1}
    built.write("scratch/.claude.json", json.dumps(state))
    built.write(f"scratch/notes-{today[:10]}.md", "this looks like a LIBERO scene")
    other.write("inbox/.draft", f"written {_run_date(fast)}")
    verdict = checked(audit_run(fast.run_dir))
    assert verdict.clean and verdict.leaks == [] and verdict.unverifiable == []
    assert informed(verdict) == {
        (built.attempt_id, "scratch/.claude.json", "date"),
        (built.attempt_id, "scratch/.claude.json", "benchmark"),
        (built.attempt_id, f"scratch/notes-{today[:10]}.md", "date"),
        (built.attempt_id, f"scratch/notes-{today[:10]}.md", "benchmark"),
        (other.attempt_id, "inbox/.draft", "date"),
    }
    assert {x.source for x in verdict.information or []} == {"actor_written"}
    shown = {(x.where, x.kind): x.excerpt for x in verdict.information or []}
    assert today in shown["scratch/.claude.json", "date"]
    assert "LIBERO" in shown[f"scratch/notes-{today[:10]}.md", "benchmark"]
    recorded = json.loads((fast.run_dir / AUDIT_FILE).read_text())
    assert recorded == verdict.document() and len(recorded["information"]) == 5
    (event,) = [e for e in fast.run.events() if e["event"] == "audited"]
    assert (event["clean"], event["leaks"], event["information"]) == (True, 0, 5)


def test_the_same_date_or_name_handed_to_the_actor_is_a_leak(fast: RunBuilder) -> None:
    built = fast.attempt(fast.cases[0])
    day = _created(fast)[:10]
    built.write("scratch/today.txt", f"today is {day}")
    built.plant_observation(1, {"note": f"captured {day}"})
    built.write(f"outbox/frame-{day}.png", FRAME)
    built.plant_observation(2, {"libero_scene": "kitchen"})
    text = built.instructions() + f"\nToday is {day}; this is a LIBERO scene.\n"
    (built.directory / "launch_message.json").write_text(json.dumps({"instructions": text}))
    verdict = checked(scan_run(fast.run_dir))
    assert not verdict.clean
    assert kinds_at(verdict, "outbox/obs-1.json") == {"date"}
    assert kinds_at(verdict, f"outbox/frame-{day}.png") == {"date"}
    assert kinds_at(verdict, "outbox/obs-2.json") == {"benchmark", "private_key"}
    assert kinds_at(verdict, "instructions") == {"date", "benchmark"}
    assert {x.source for x in verdict.leaks} == {"handed"}
    excerpts = {x.identifier_kind: x.excerpt for x in verdict.leaks if x.where == "instructions"}
    assert day in excerpts["date"] and "LIBERO" in excerpts["benchmark"]
    # The actor's own note of the same day is still only information.
    assert informed(verdict) == {(built.attempt_id, "scratch/today.txt", "date")}


@pytest.mark.parametrize("folder", ["scratch/.codex/sessions", "inbox"])
def test_a_task_name_or_seed_an_actor_wrote_still_fails_with_its_file_and_excerpt(
    fast: RunBuilder, folder: str
) -> None:
    built = fast.attempt(fast.cases[0])
    task_name = load_catalog().entry(built.case.suite, built.case.task_index).task_name
    session = {"at": _created(fast), "guess": task_name}
    built.write(f"{folder}/session.json", json.dumps(session))
    built.write(f"{folder}/rng.txt", "probably seed 20260907 again")
    verdict = checked(audit_run(fast.run_dir))
    assert not verdict.clean
    assert hits(verdict) == {
        (built.attempt_id, f"{folder}/session.json", "task_name"),
        (built.attempt_id, f"{folder}/rng.txt", "seed"),
    }
    assert {x.source for x in verdict.leaks} == {"actor_written"}
    excerpts = {x.where: x.excerpt for x in verdict.leaks}
    assert task_name in excerpts[f"{folder}/session.json"]
    assert excerpts[f"{folder}/rng.txt"] == "probably seed 20260907 again"
    # The date beside the task name is information, reported apart.
    assert informed(verdict) == {(built.attempt_id, f"{folder}/session.json", "date")}


def test_an_endpoint_path_that_names_a_suite_is_a_leak_on_its_own(base: Path) -> None:
    builder = RunBuilder(base, build_plan("fast"), mailbox_name="libero_10_boxes")
    spawned, external = (
        builder.attempt(builder.cases[0]),
        builder.attempt(builder.cases[1], spawned=False),
    )
    verdict = checked(scan_run(builder.run_dir))
    for where in ("endpoint", "instructions", "argv", "env"):
        assert {"suite", "benchmark"} <= kinds_at(verdict, where), where
    assert sources_at(verdict, "endpoint") == {"handed"}
    excerpts = {x.excerpt for x in verdict.leaks if x.where == "endpoint"}
    assert all("libero_10_boxes" in e and str(base) in e for e in excerpts)
    # With nothing else handed (an external actor given only its endpoint) and the
    # endpoint gone, the path itself is still searched.
    (external.directory / "launch_message.json").unlink()
    shutil.rmtree(external.endpoint.root)
    verdict = checked(scan_run(builder.run_dir))
    assert {where for attempt, where, _ in hits(verdict) if attempt == external.attempt_id} == {
        "endpoint"
    }
    assert (external.attempt_id, "endpoint", "suite") in hits(verdict)
    assert external.attempt_id in {u.attempt_id for u in verdict.unverifiable}
    assert spawned.attempt_id not in {u.attempt_id for u in verdict.unverifiable}


def test_only_outbox_and_the_endpoints_own_folders_are_handed(fast: RunBuilder) -> None:
    for where in ("outbox", "outbox/obs-1.json", "outbox/.tmp/x", "inbox", "scratch"):
        assert source_of(where) == "handed", where
    for where in ("inbox/resp-1.json", "scratch/x", "notes.txt", "outboxes/x", "outbox.txt"):
        assert source_of(where) == "actor_written", where
    built = fast.attempt(fast.cases[0])
    built.write("2031-01-02.txt", "an actor unconfined wrote beside its folders")
    built.write("outbox/2031-01-02.txt", "")
    verdict = checked(scan_run(fast.run_dir))
    assert hits(verdict) == {(built.attempt_id, "outbox/2031-01-02.txt", "date")}
    assert informed(verdict) == {(built.attempt_id, "2031-01-02.txt", "date")}


# --- paths refused before any actor starts -----------------------------------------------

LAUNCH_RUN_ID = "run-20261202T101010Z-abcd"


@pytest.fixture(scope="module")
def at_launch() -> Identifiers:
    """What `mailroom launch` knows before any actor starts."""
    return launch_identifiers(
        run_id=LAUNCH_RUN_ID,
        run_dir=Path("/srv/results") / LAUNCH_RUN_ID,
        cases=build_plan("fast").to_cases(),
        created_at="2026-12-02T10:10:10.000Z",
    )


@pytest.mark.parametrize(
    ("path", "kind", "shown"),
    [
        (f"/tmp/{LAUNCH_RUN_ID}/mb", "run_id", LAUNCH_RUN_ID),
        ("/tmp/libero_10_boxes", "suite", "libero_10"),
        ("/tmp/libero_boxes", "benchmark", "libero"),
        ("/tmp/mb-2026-12-02", "date", "2026-12-02"),
        ("/tmp/mb-02.12.2026", "date", "02.12.2026"),  # the run's own day, written otherwise
        ("/tmp/mb-1999-01-31", "date", "1999-01-31"),  # any date: a path is handed
        ("/tmp/seed-20260907/mb", "seed", "20260907"),
        ("/tmp/libero_10-t000-i00-o0-s20260907", "case_id", "libero_10-t000-i00-o0-s20260907"),
        ("/srv/living_room_scene2/mb", "task_name", "living_room_scene2"),
    ],
)
def test_a_mailbox_root_that_names_something_private_is_refused(
    at_launch: Identifiers, path: str, kind: str, shown: str
) -> None:
    found: dict[str, str] = {k: e for k, e in path_disclosures(path, at_launch)}
    assert kind in found, found
    assert shown.lower() in found[kind].lower()
    assert all(len(e) <= 200 for e in found.values())


@pytest.mark.parametrize(
    "path",
    [
        "/tmp/mailroom-mb-3f9a07c2e1d54b6a",
        "/tmp/mailroom-k2x9_q7z",  # as `tempfile.mkdtemp(prefix="mailroom-")` names one
        "/srv/mailboxes/run/7/endpoints",
        "/home/alice/.cache/mailroom/mb",
    ],
)
def test_a_neutral_mailbox_root_passes(at_launch: Identifiers, path: str) -> None:
    assert path_disclosures(path, at_launch) == []
    assert path_disclosures(Path(path), at_launch) == []


def test_a_path_is_judged_in_the_order_the_audit_reports_each_kind_once(
    at_launch: Identifiers,
) -> None:
    found = path_disclosures(f"/tmp/libero_10/{LAUNCH_RUN_ID}/2026-12-02/libero_90", at_launch)
    assert [kind for kind, _ in found] == ["run_id", "benchmark", "suite", "date"]


def test_a_relative_path_is_judged_where_it_leads_too(
    at_launch: Identifiers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "libero_runs").mkdir()
    monkeypatch.chdir(tmp_path / "libero_runs")
    assert [kind for kind, _ in path_disclosures("mb", at_launch)] == ["benchmark"]
    os.symlink(tmp_path / "libero_runs", tmp_path / "neutral")
    assert [k for k, _ in path_disclosures(tmp_path / "neutral" / "mb", at_launch)] == ["benchmark"]


def test_launch_identifiers_know_the_run_directory_and_today_by_default() -> None:
    identifiers = launch_identifiers(
        run_id="q3-alpha", run_dir=Path("/srv/vault-run-dir"), cases=build_plan("fast").to_cases()
    )
    assert [k for k, _ in path_disclosures("/tmp/vault-run-dir-mb", identifiers)] == [
        "run_directory"
    ]
    now = datetime.now(UTC)
    today = f"{now.day:02d}.{now.month:02d}.{now.year}"
    assert [k for k, _ in path_disclosures(f"/tmp/mb-{today}", identifiers)] == ["date"]


# --- short seeds and other numbers -------------------------------------------------------


@pytest.fixture
def canonical(base: Path) -> RunBuilder:
    """Seed 7 and initial states 0-49: short numbers that occur everywhere."""
    return RunBuilder(base, build_plan("canonical", suite="libero_10"))


def test_short_seeds_and_state_indices_inside_other_numbers_are_not_leaks(
    canonical: RunBuilder,
) -> None:
    built = canonical.attempt(canonical.cases[0], observations=7)
    assert built.case.seed == 7
    request_id = "7" * 32
    built.plant_observation(1, {"request_id": request_id})
    built.write(
        "scratch/numbers.txt",
        "0.7 7 17 70 7e-05 1.7 obs-7 [7] x7 v7.0 state 7 initial 7 7.0 -7 "
        "a7a7a7a7a7a7a7a7a7a7 request 7 sequence 12 seeded rows: 3",
    )
    built.write("inbox/resp-6.json", json.dumps({"request_id": "20310102", "note": "seeds: 3"}))
    built.write("inbox/resp-7.json", json.dumps({"request_id": "f7e7d7c7", "note": "seeds: 3"}))
    built.write("scratch/7.txt", "7")
    assert (built.endpoint.root / "outbox" / "obs-7.json").exists()
    verdict = checked(scan_run(canonical.run_dir))
    assert verdict.clean, verdict.leaks


@pytest.mark.parametrize(
    "text",
    [
        '{"seed": 7}',
        "seed 7",
        "seed=7",
        "random_seed: 7",
        "the seed is 7.",
        "SEED-7",
    ],
)
def test_a_short_seed_next_to_the_word_seed_is_a_leak(canonical: RunBuilder, text: str) -> None:
    built = canonical.attempt(canonical.cases[0])
    built.write("scratch/n.txt", text)
    assert "seed" in kinds_at(scan_run(canonical.run_dir), "scratch/n.txt")


@pytest.mark.parametrize("text", ["seed 77", "seed 0.7", "seed 7.5", "seed: 17", "seed7x"])
def test_other_numbers_next_to_the_word_seed_are_not(canonical: RunBuilder, text: str) -> None:
    built = canonical.attempt(canonical.cases[0])
    built.write("scratch/n.txt", text)
    assert "seed" not in kinds_at(scan_run(canonical.run_dir), "scratch/n.txt")


@pytest.mark.parametrize(
    ("text", "leak"),
    [
        ("initial state 12", True),
        ("init_state=49", True),
        ("state_index: 3", True),
        ("initial state 50", False),  # not one of the run's indices (0-49)
        ("state 12", False),
        ("initial state 1.5", False),
    ],
)
def test_initial_state_indices_are_found_in_context_only(
    canonical: RunBuilder, text: str, leak: bool
) -> None:
    built = canonical.attempt(canonical.cases[0])
    built.write("scratch/n.txt", text)
    assert ("init_state_index" in kinds_at(scan_run(canonical.run_dir), "scratch/n.txt")) == leak


def test_a_long_seed_or_a_date_inside_hex_or_a_decimal_is_not_a_leak(fast: RunBuilder) -> None:
    built = fast.attempt(fast.cases[0])
    built.plant_observation(1, {"request_id": "0a20260907" + "b" * 22})
    built.write(
        "scratch/n.txt",
        "0.20260907 120260907 20260907.5 sha 20260907ffeeddccbbaa9988 "
        "e3b0c44298fc1c149afbf4c8996fb92420310102ae41e4649b934ca495991b7852b855 1.20310102",
    )
    assert checked(scan_run(fast.run_dir)).clean


def test_a_run_named_by_a_hex_string_is_still_found(base: Path) -> None:
    name = "9f86d081884c7d659a2feaa0c55ad015"
    builder = RunBuilder(base, build_plan("fast"), run_id=name, dir_name=name)
    built = builder.attempt(builder.cases[0])
    built.write("scratch/n.txt", f"run {name}")
    assert hits(scan_run(builder.run_dir)) == {(built.attempt_id, "scratch/n.txt", "run_id")}


# --- what cannot be checked --------------------------------------------------------------


def test_an_endpoint_that_no_longer_exists_is_unverifiable_not_clean(fast: RunBuilder) -> None:
    first, _second = (fast.attempt(case) for case in fast.cases)
    shutil.rmtree(first.endpoint.root)
    verdict = checked(audit_run(fast.run_dir))
    assert not verdict.clean and verdict.leaks == []
    assert [u.attempt_id for u in verdict.unverifiable] == [first.attempt_id]
    assert "no longer exists" in verdict.unverifiable[0].reason
    assert verdict.files_scanned == 10  # the second endpoint only
    events = [e for e in fast.run.events() if e["event"] == "audited"]
    assert [(e["clean"], e["leaks"], e["unverifiable"]) for e in events] == [(False, 0, 1)]


def test_instructions_are_still_searched_when_the_endpoint_is_gone(fast: RunBuilder) -> None:
    built = fast.attempt(fast.cases[0])
    shutil.rmtree(fast.mailbox_root)
    text = built.instructions() + "\nsuite: libero_10\n"
    (built.directory / "launch_message.json").write_text(json.dumps({"instructions": text}))
    verdict = checked(scan_run(fast.run_dir))
    assert (built.attempt_id, "instructions", "suite") in hits(verdict)
    assert [u.attempt_id for u in verdict.unverifiable] == [built.attempt_id]


def test_an_attempt_without_its_endpoint_mapping_is_unverifiable(fast: RunBuilder) -> None:
    built = fast.attempt(fast.cases[0])
    (built.directory / "endpoint.json").unlink()
    verdict = scan_run(fast.run_dir)
    assert [u.attempt_id for u in verdict.unverifiable] == [built.attempt_id]


def test_an_attempt_that_stopped_before_anything_was_handed_out_has_nothing_to_check(
    fast: RunBuilder,
) -> None:
    """The orchestrator created the attempt's evidence, then stopped before writing the
    endpoint mapping: no instructions existed, no actor was started."""
    EpisodeEvidence(fast.run.episode_dir(fast.cases[0].attempt_id(1))).close()
    verdict = checked(scan_run(fast.run_dir))
    assert verdict.clean and verdict.attempts_scanned == 1


def test_a_directory_without_a_manifest_is_not_a_run(base: Path) -> None:
    with pytest.raises(NotARunDirectoryError, match="not a run directory"):
        scan_run(base)


# --- the verdict's contract and cost ------------------------------------------------------


def test_the_verdict_model_and_its_generated_schema_agree(fast: RunBuilder) -> None:
    fast.attempt(fast.cases[0]).write("scratch/x.txt", "libero_10 on 2026-12-02")
    document = scan_run(fast.run_dir).document()
    assert schema_errors(AUDIT_SCHEMA, document) == []
    assert document["schema"] == "mailroom.audit/v3"
    assert [x["identifier_kind"] for x in document["leaks"]] == ["suite"]
    assert [x["source"] for x in document["leaks"]] == ["actor_written"]
    assert {(x["kind"], x["source"]) for x in document["information"]} == {
        ("benchmark", "actor_written"),
        ("date", "actor_written"),
    }
    lying = {**document, "clean": True}
    assert schema_errors(AUDIT_SCHEMA, lying) != []
    with pytest.raises(ValidationError):
        AuditVerdict.model_validate(lying)
    long_excerpt = {**document, "leaks": [{**document["leaks"][0], "excerpt": "x" * 201}]}
    assert schema_errors(AUDIT_SCHEMA, long_excerpt) != []
    with pytest.raises(ValidationError):
        AuditVerdict.model_validate(long_excerpt)
    # Information is never a leak, so it cannot be recorded as one.
    date_leak = {**document["leaks"][0], "identifier_kind": "date"}
    as_leak = {**document, "leaks": [date_leak]}
    assert schema_errors(AUDIT_SCHEMA, as_leak) != []
    with pytest.raises(ValidationError):
        AuditVerdict.model_validate(as_leak)
    handed = {**document, "leaks": [{**date_leak, "source": "handed"}]}
    assert schema_errors(AUDIT_SCHEMA, handed) == []
    AuditVerdict.model_validate(handed)


OLDER = REPO / "tests" / "support" / "data" / "older_records"
V1_VERDICT: dict[str, Any] = json.loads((OLDER / "audit.v1.json").read_text())


def test_a_verdict_of_an_earlier_audit_is_read_as_the_current_one(fast: RunBuilder) -> None:
    fast.attempt(fast.cases[0]).write("scratch/n.txt", "LIBERO, 2026-12-02")
    assert read_verdict(fast.run_dir) is None  # never audited
    written = audit_run(fast.run_dir)
    read = read_verdict(fast.run_dir)
    assert read == written and read is not None and read.schema_ == AUDIT_SCHEMA
    assert read.clean and len(read.information or []) == 2
    # An audit.json an earlier audit wrote: read as the current version, the file left
    # as it was.
    v2 = (OLDER / "audit.v2.json").read_bytes()
    (fast.run_dir / AUDIT_FILE).write_bytes(v2)
    old = read_verdict(fast.run_dir)
    assert old is not None and old.schema_ == AUDIT_SCHEMA and not old.clean
    assert [x.source for x in old.leaks] == ["actor_written"] and len(old.information or []) == 1
    assert (fast.run_dir / AUDIT_FILE).read_bytes() == v2
    (fast.run_dir / AUDIT_FILE).write_text(json.dumps(V1_VERDICT))
    old = read_verdict(fast.run_dir)
    assert old is not None and old.schema_ == AUDIT_SCHEMA and old.information is None
    assert [(x.identifier_kind, x.source) for x in old.leaks] == [("date", None), ("suite", None)]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({**V1_VERDICT, "information": []}, "does not match mailroom.audit/v1"),
        (
            {**V1_VERDICT, "leaks": [{**V1_VERDICT["leaks"][0], "source": "actor_written"}]},
            "does not match mailroom.audit/v1",
        ),
        ({**V1_VERDICT, "schema": "mailroom.audit/v2"}, "does not match mailroom.audit/v2"),
        ({**V1_VERDICT, "schema": "mailroom.audit/v3"}, "does not match mailroom.audit/v3"),
        ({**V1_VERDICT, "schema": "mailroom.audit/v4"}, "is not an audit verdict"),
        ([V1_VERDICT], "is not an audit verdict"),
        ({**V1_VERDICT, "clean": True}, "does not match mailroom.audit/v1"),
    ],
)
def test_an_audit_file_that_is_no_verdict_is_refused_by_its_reader(
    fast: RunBuilder, document: object, message: str
) -> None:
    (fast.run_dir / AUDIT_FILE).write_text(json.dumps(document))
    with pytest.raises(AuditError, match=message):
        read_verdict(fast.run_dir)
    (fast.run_dir / AUDIT_FILE).write_text("{not json")
    with pytest.raises(AuditError, match="is not JSON"):
        read_verdict(fast.run_dir)


def test_a_few_thousand_files_are_all_audited(fast: RunBuilder) -> None:
    """Every one of 3,010 files is read: a leak in the last one written is found. (The
    scan's speed is a figure of `orchestrator/perf/audit_scan.py`, never a timed assertion.)"""
    built = fast.attempt(fast.cases[0])
    document = built.observation(1)
    for sequence in range(3, 1003):
        published = {**document, "sequence": sequence}
        publish_bytes(
            built.endpoint.observation_file(sequence), document_bytes(published), durable=False
        )
        for camera in CAMERAS:
            publish_bytes(built.endpoint.image_file(sequence, camera), FRAME, durable=False)
    verdict = scan_run(fast.run_dir)
    assert verdict.clean and verdict.files_scanned == 3010
    last = {**document, "sequence": 1002, "instruction": f"{fast.cases[0].suite} task"}
    publish_bytes(built.endpoint.observation_file(1002), document_bytes(last), durable=False)
    found = scan_run(fast.run_dir)
    assert {leak.where for leak in found.leaks} == {"outbox/obs-1002.json"}


def test_names_an_actor_chose_never_break_the_audit(fast: RunBuilder) -> None:
    """Non-UTF-8 names, and a path longer than the system's limit, are still searched."""
    built = fast.attempt(fast.cases[0])
    odd = os.fsencode(built.endpoint.scratch) + b"/\xff-not-utf-8"
    os.mkdir(odd)
    fd = os.open(odd, os.O_RDONLY | os.O_DIRECTORY)
    for level in range(20):  # 20 x 250 characters: past PATH_MAX (4096)
        name = f"{level:02d}" + "d" * 248
        os.mkdir(name, dir_fd=fd)
        inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    leak = os.open("note.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(leak, b"the answer is libero_10")
    os.close(leak)
    os.close(fd)
    verdict = scan_run(fast.run_dir)
    json.dumps(verdict.document())  # every text in it is valid
    assert verdict.unverifiable == []
    [where] = {leak.where for leak in verdict.leaks}  # the note, 20 folders down
    assert where.startswith("scratch/\\xff-not-utf-8/00") and len(where) == 1000  # capped
