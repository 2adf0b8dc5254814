"""A launch stopped by a person: Ctrl-C (SIGINT to the terminal's whole process group)
or SIGTERM (to the launch alone), sent while an attempt is live.

A real `mailroom launch` of the toy family (its fake simulator, installed by
`toy_family_runs.install_toy_family`) with sandboxed diagnostic actors that think a few
seconds: one slot, so one attempt is recorded, the next is live when the signal lands
and the rest wait. The launch exits 130 (143), records the live attempt as interrupted
with the reason, says on stderr what the run holds and the command that continues it,
prints no "Aborted!", no leaked-semaphore warning and no traceback, and leaves no
process behind. The printed command then completes the run: the cases not started
run, the recorded attempts stay as they were. A second Ctrl-C during the stop ends the
launch at once, still with no leaked semaphore and no process left, and `resume`
records what it cut short.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, mailroom_exe, sandbox_processes_left
from mailroom.orchestrator.records.result import EpisodeResult
from mailroom.orchestrator.records.run_directory import AttemptRecord, RunDirectory
from toy_family_runs import install_toy_family

ACTOR = REPO / "agents" / "scripted_diagnostic" / "actor.py"
THINK_S = 4  # each answer: the attempt stays live well past the stop
LIVE_WITHIN_S = 120.0
GONE_WITHIN_S = 15.0


@pytest.fixture(scope="module")
def toy_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return {**install_toy_family(tmp_path_factory), "COLUMNS": "200"}


@pytest.fixture(scope="module")
def plan(toy_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("plan") / "plan.json"
    options = ["--kind", "task_coverage", "--suite", "toyworld_shelf", "--init-states", "0,1"]
    made = subprocess.run(
        [mailroom_exe(), "plan", *options, "--out", str(out)],
        capture_output=True,
        text=True,
        env=toy_env,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    return out


def _descendants(pid: int) -> set[tuple[int, str]]:
    """Every process below `pid`, each with its start time (a pid can be reused)."""
    found: set[tuple[int, str]] = set()
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                started = _start_time(child)
                if started is not None:
                    found.add((child, started))
                    todo.append(child)
    return found


def _start_time(pid: int) -> str | None:
    """The process's start time, None once it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else fields[19]


def _left(processes: set[tuple[int, str]]) -> list[int]:
    deadline = time.monotonic() + GONE_WITHIN_S
    while True:
        left = [pid for pid, started in processes if _start_time(pid) == started]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def _one_recorded_one_live(run_dir: Path) -> bool:
    attempts = RunDirectory(run_dir).attempts() if (run_dir / "episodes").is_dir() else []
    recorded = [a for a in attempts if a.result is not None]
    live = [a for a in attempts if a.result is None and a.actor_saw_anything()]
    return bool(recorded) and bool(live)


@pytest.fixture
def launched(
    toy_env: dict[str, str], plan: Path, tmp_path: Path, mailbox_root: Path
) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    run_dir = tmp_path / "run"
    actor = f"{{python}} {ACTOR} {{endpoint}} --chunks 1 --think {THINK_S}"
    process = subprocess.Popen(
        [
            *(mailroom_exe(), "launch", str(plan), "--profile", "scripted_diagnostic"),
            *("--run-dir", str(run_dir), "--mailbox-root", str(mailbox_root)),
            *("--actor", actor, "--slots", "1", "--response-timeout", "60"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=toy_env,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    try:
        deadline = time.monotonic() + LIVE_WITHIN_S
        while not _one_recorded_one_live(run_dir):
            assert process.poll() is None, process.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no attempt was live after one was recorded"
            time.sleep(0.1)
        yield process, run_dir
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _results(attempts: list[AttemptRecord]) -> dict[str, bytes]:
    return {
        a.attempt_id: (a.directory / "result.json").read_bytes()
        for a in attempts
        if a.result is not None
    }


@pytest.mark.parametrize(
    ("sent", "to_group", "code", "heard"),
    [
        (signal.SIGINT, True, 130, "Ctrl-C (SIGINT)"),
        (signal.SIGTERM, False, 143, "SIGTERM"),
    ],
    ids=["ctrl-c", "sigterm"],
)
def test_a_stopped_launch_says_how_to_continue_and_resume_completes_it(
    launched: tuple[subprocess.Popen[str], Path],
    toy_env: dict[str, str],
    sent: signal.Signals,
    to_group: bool,
    code: int,
    heard: str,
) -> None:
    process, run_dir = launched
    below = _descendants(process.pid)
    assert below, "the launch has no worker"
    if to_group:
        os.killpg(process.pid, sent)
    else:
        process.send_signal(sent)
    _, stderr = process.communicate(timeout=120)

    assert process.returncode == code, stderr[-3000:]
    for unwanted in ("Aborted!", "leaked semaphore", "Traceback"):
        assert unwanted not in stderr, stderr[-3000:]
    assert f"stopping ({sent.name})" in stderr
    said = re.search(
        rf"stopped by {re.escape(heard)}: (\d+) attempt\(s\) finished, (\d+) cut short "
        r"and recorded as interrupted, (\d+) cut short before their actor saw anything, "
        r"(\d+) of the plan's 4 case\(s\) not started",
        stderr,
    )
    assert said is not None, stderr[-3000:]
    finished, interrupted, unseen, not_started = map(int, said.groups())
    attempts = RunDirectory(run_dir).attempts()
    # The live attempt, whose actor had seen an observation, is recorded by the stop
    # itself, with the reason; the finished one is untouched.
    cut_short = [
        a.attempt_id
        for a in attempts
        if isinstance(a.result, EpisodeResult)
        and [e.kind for e in a.result.errors] == ["interrupted"]
    ]
    assert interrupted == len(cut_short) >= 1
    for attempt in attempts:
        if attempt.attempt_id in cut_short:
            assert isinstance(attempt.result, EpisodeResult)
            assert f"stopped ({sent.name})" in attempt.result.errors[0].message
    assert finished == sum(a.result is not None for a in attempts) - interrupted >= 1
    assert unseen == sum(a.result is None for a in attempts)
    assert not_started == 4 - len(attempts)
    stopped = [e for e in RunDirectory(run_dir).events() if e.get("event") == "launch_stopped"]
    assert [(e["signal"], e["interrupted"]) for e in stopped] == [(sent.name, interrupted)]
    kept = _results(attempts)
    assert _left(below) == []
    assert sandbox_processes_left(run_dir) == []

    continued = re.search(r"^to continue: (.+)$", stderr, re.MULTILINE)
    assert continued is not None, stderr[-3000:]
    command = shlex.split(continued.group(1))
    assert command == ["mailroom", "resume", str(run_dir)]
    resumed = subprocess.run(
        [mailroom_exe(), *command[1:]],
        capture_output=True,
        text=True,
        env=toy_env,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = RunDirectory(run_dir).attempts()
    assert all(isinstance(a.result, EpisodeResult) for a in after)
    assert len({a.case_id for a in after}) == 4
    assert {a.attempt_id: _results(after)[a.attempt_id] for a in attempts if a.result} == kept
    for attempt in after:
        assert isinstance(attempt.result, EpisodeResult)
        if attempt.attempt_id in cut_short:
            assert [e.kind for e in attempt.result.errors] == ["interrupted"]
        else:
            assert attempt.result.outcome in ("success", "failure")


def test_a_second_ctrl_c_stops_at_once_and_resume_records_what_it_cut_short(
    launched: tuple[subprocess.Popen[str], Path], toy_env: dict[str, str]
) -> None:
    """The second Ctrl-C lands while the first one's stop is under way: the launch ends
    at once (130), says how to continue, leaves no process and no leaked semaphore, and
    `resume` records the attempt it cut short as interrupted, then runs the rest."""
    process, run_dir = launched
    below = _descendants(process.pid)
    live = [
        a.attempt_id
        for a in RunDirectory(run_dir).attempts()
        if a.result is None and a.actor_saw_anything()
    ]
    assert process.stderr is not None
    os.killpg(process.pid, signal.SIGINT)
    said: list[str] = []
    for line in process.stderr:
        said.append(line)
        if "stopping (SIGINT)" in line:
            break
    os.killpg(process.pid, signal.SIGINT)
    said.append(process.stderr.read())  # to its end: the resource tracker's too
    process.wait(timeout=60)
    stderr = "".join(said)

    assert process.returncode == 130, stderr[-3000:]
    assert f"stopped at once; to continue: mailroom resume {run_dir}" in stderr, stderr[-3000:]
    for unwanted in ("Aborted!", "leaked semaphore", "Traceback", "stopped by"):
        assert unwanted not in stderr, stderr[-3000:]
    assert _left(below) == []
    assert sandbox_processes_left(run_dir) == []
    # Stopped at once: the attempt that was live has no result yet (resume records it).
    unrecorded = {a.attempt_id for a in RunDirectory(run_dir).attempts() if a.result is None}
    assert live and set(live) <= unrecorded

    resumed = subprocess.run(
        [mailroom_exe(), "resume", str(run_dir)],
        capture_output=True,
        text=True,
        env=toy_env,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = {a.attempt_id: a for a in RunDirectory(run_dir).attempts()}
    assert len({a.case_id for a in after.values()}) == 4
    for attempt_id in live:
        result = after[attempt_id].result
        assert isinstance(result, EpisodeResult)
        assert [e.kind for e in result.errors] == ["interrupted"]
    assert all(isinstance(a.result, EpisodeResult) for a in after.values())
