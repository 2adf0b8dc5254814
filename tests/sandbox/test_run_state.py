"""A run's state between launches, on real run directories (no simulator): `status`,
a corrupt latest result, and a run that is in use."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from pathlib import Path

from conftest import mailroom_exe
from mailroom.orchestrator.campaign.coordinator import schedule
from recorded_runs import make_run, write_result


def _status(run_dir: Path) -> tuple[int, dict[str, int]]:
    done = subprocess.run(
        [mailroom_exe(), "status", str(run_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, json.loads(done.stdout) if done.stdout else {}


def test_status_counts_each_case_once_by_its_latest_attempt(tmp_path: Path) -> None:
    run, cases = make_run(tmp_path, proprio=False)
    assert len(cases) == 2
    write_result(run, cases[0], 1, outcome="success", executed=5, proprio=False)
    code, state = _status(run.root)
    assert code == 4  # incomplete
    assert state == {
        "selected": 2,
        "completed": 1,
        "errored": 0,
        "corrupt": 0,
        "unrecorded": 0,
        "unattempted": 1,
        "in_progress": 0,
        "live": 0,
        "parked": 0,
        "queued": 1,
        "done": 1,
    }
    # An attempt begun but without a result, and one whose result is corrupt.
    started = run.episode_dir(cases[1].attempt_id(1))
    started.mkdir(parents=True)
    (started / "events.jsonl").write_text('{"t": 0, "event": "observation_published"}\n')
    _, state = _status(run.root)  # no launch runs: it was interrupted
    assert (state["completed"], state["errored"], state["unrecorded"]) == (1, 1, 1)
    with run.lock():  # a launch holds the run: it is running
        _, state = _status(run.root)
        assert (state["errored"], state["unattempted"], state["in_progress"]) == (0, 1, 1)
        assert (state["live"], state["parked"], state["queued"], state["done"]) == (1, 0, 0, 1)
        # Once its episode says it started on its task's shared simulator, it is parked
        # whenever it waits: counted among the live ones as parked.
        with (started / "events.jsonl").open("a") as log:
            log.write('{"t": 1, "event": "episode_started", "simulator": "parked"}\n')
        _, state = _status(run.root)
        assert (state["live"], state["parked"], state["queued"]) == (1, 1, 0)
    (started / "result.json").write_text('{"schema": "mailroom.episode_result/v2", "outc')
    _, state = _status(run.root)
    assert (state["errored"], state["corrupt"], state["unattempted"]) == (1, 1, 0)
    assert state["selected"] == state["completed"] + state["errored"] + state["unattempted"]
    # An errored result is a result: the run is done, and it is not counted as completed.
    write_result(run, cases[1], 1, outcome="error", executed=0, proprio=False)
    code, state = _status(run.root)
    assert code == 0
    assert (state["completed"], state["errored"], state["corrupt"]) == (1, 1, 0)
    (tmp_path / "nothing-here").mkdir()
    assert _status(tmp_path / "nothing-here")[0] == 2  # not a run directory


def test_a_corrupt_latest_result_is_marked_interrupted_never_re_run(tmp_path: Path) -> None:
    run, cases = make_run(tmp_path, proprio=False)
    write_result(run, cases[0], 1, outcome="failure", executed=5, proprio=False)
    corrupt = run.episode_dir(cases[0].attempt_id(1)) / "result.json"
    corrupt.write_bytes(corrupt.read_bytes()[:80])  # cut mid-document
    plan = schedule(cases, run)
    assert [r.attempt_id for r in plan.interrupted] == [cases[0].attempt_id(1)]
    assert [(w.case.case_id, w.attempt) for w in plan.work] == [(cases[1].case_id, 1)]
    # Only an explicit --rerun-errored makes a new, recorded attempt of it.
    again = schedule(cases, run, rerun_errored=True)
    assert (cases[0].case_id, 2) in [(w.case.case_id, w.attempt) for w in again.work]


def test_a_launch_or_resume_on_a_run_in_use_is_refused_with_exit_5(tmp_path: Path) -> None:
    run, _ = make_run(tmp_path, proprio=False)
    manifest = run.manifest_path.read_bytes()
    fd = os.open(run.root / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another launch holds it
        for command in (
            [mailroom_exe(), "resume", str(run.root)],
            [
                *(mailroom_exe(), "launch", str(run.plan_path), "--profile"),
                *("scripted_diagnostic", "--run-dir", str(run.root)),
            ],
        ):
            refused = subprocess.run(command, capture_output=True, text=True, timeout=120)
            assert refused.returncode == 5, refused.stderr[-2000:]
            assert "in use by another launch" in " ".join(refused.stderr.split())
    finally:
        os.close(fd)
    assert run.manifest_path.read_bytes() == manifest  # nothing was written
