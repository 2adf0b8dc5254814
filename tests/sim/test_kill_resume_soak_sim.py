"""SIGKILL the coordinator at random points of a multi-episode run, resuming each time
(6 kills of a 4-episode run in `make test`, half at any moment and half after an
observation was delivered; MAILROOM_RESUME_KILLS=20 or more for a longer run).

After every kill: no completed episode lost, changed or duplicated; every result that
exists is complete and valid; no actor or worker survives. At the end every case has
exactly one result, and attempts cut short after their actor saw observations are
recorded as interrupted.

Every survivor fails the test: a worker holds its actors in a pid namespace of its own,
so not even a sandbox that bubblewrap was still setting up outlives it
(`actors/lifetime.py`; `test_worker_lifetime.py` kills workers at random moments).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

from conftest import copied_actor, launch_command, mailroom_exe, sandbox_processes_left
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.episode.video import probe_video

# Survivors of a kill are the worker-lifetime test's (`test_worker_lifetime.py`, 60 kills);
# this one is about the records a kill leaves and what resume makes of them.
KILLS = int(os.environ.get("MAILROOM_RESUME_KILLS", "6"))


def _survivors(marker: str) -> list[int]:
    """Processes whose command line mentions this test's private paths."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            status = (entry / "status").read_text()
        except OSError:
            continue
        if marker.encode() in cmdline and "\nState:\tZ" not in status:
            found.append(int(entry.name))
    return found


def _described(pid: int) -> str:
    """A survivor as a failure names it: its command line, parent, user and state."""
    try:
        cmdline = (Path(f"/proc/{pid}") / "cmdline").read_bytes().replace(b"\0", b" ")
        status = (Path(f"/proc/{pid}") / "status").read_text()
    except OSError:
        return f"{pid} (gone)"
    wanted = ("State:", "PPid:", "Uid:", "NSpid:")
    fields = [line for line in status.splitlines() if line.startswith(wanted)]
    return f"{pid} {cmdline.decode(errors='replace')[:300]!r} {fields}"


def _left_after(marker: str, bound_s: float = 15.0) -> list[int]:
    """The processes still there after `bound_s` (none: all of them went in time)."""
    deadline = time.monotonic() + bound_s
    while survivors := _survivors(marker):
        if time.monotonic() > deadline:
            return survivors
        time.sleep(0.05)
    return []


def _actors_left_after_kill(marker: str) -> list[str]:
    """Actors still there after the kill, described."""
    return [_described(pid) for pid in _left_after(marker)]


def _check_evidence(run_dir: Path, completed: dict[str, str]) -> None:
    """Results are whole and never change; no case has two non-error results."""
    successes: dict[str, int] = {}
    for result_file in run_dir.glob("episodes/*/result.json"):
        data = result_file.read_bytes()
        doc = json.loads(data)
        assert schema_errors("mailroom.episode_result/v8", doc) == []
        attempt = result_file.parent.name
        digest = hashlib.sha256(data).hexdigest()
        assert completed.setdefault(attempt, digest) == digest, f"{attempt} changed"
        if doc["outcome"] != "error":
            successes[doc["case_id"]] = successes.get(doc["case_id"], 0) + 1
            steps = (result_file.parent / "steps.jsonl").read_text().splitlines()
            assert len(steps) == doc["counters"]["executed_controls"]
            for video in (result_file.parent / "videos").glob("*.mp4"):
                assert probe_video(video).frames == doc["counters"]["executed_controls"]
        else:
            assert [e["kind"] for e in doc["errors"]] == ["interrupted"]
    assert all(n == 1 for n in successes.values()), successes
    for video in run_dir.glob("episodes/*/videos/*.mp4"):
        probe_video(video)  # a final name is always a whole, decodable file


def _delivered_in_open_attempt(run_dir: Path) -> bool:
    for events in run_dir.glob("episodes/*/events.jsonl"):
        if not (events.parent / "result.json").exists() and (
            b"observation_published" in events.read_bytes()
        ):
            return True
    return False


def test_sigkills_at_random_points_then_resume(tmp_path: Path, mailbox_root: Path) -> None:
    rng = random.Random(20261129)
    actor = (
        f"python3 {copied_actor(tmp_path / 'actors', 'probe_actor.py')} {{endpoint}} --delay 0.2"
    )
    plan = tmp_path / "plan.json"
    subprocess.run(
        [
            mailroom_exe(),
            "plan",
            "--kind",
            "task_coverage",
            "--suite",
            "libero_10",
            "--task-ids",
            "0,1,3,4",
            "--out",
            str(plan),
        ],
        check=True,
        capture_output=True,
    )
    run_dir, mailbox = tmp_path / "soak-run", mailbox_root / "soak-mb"
    first = launch_command(
        plan,
        run_dir,
        mailbox,
        actor,
        "--workers",
        "1",
        "--max-policy-calls",
        "5",
        "--json",
    )
    again = [mailroom_exe(), "resume", str(run_dir), "--json", "--mailbox-root", str(mailbox)]
    completed: dict[str, str] = {}
    kills = 0
    while kills < KILLS:
        # Errored (interrupted) cases come back as new attempts, so kills keep landing.
        command = [*again, "--rerun-errored"] if (run_dir / "manifest.json").exists() else first
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if kills % 2 == 0:
            time.sleep(rng.uniform(0.3, 9.0))  # anywhere, start-up included
        else:
            deadline = time.monotonic() + 120
            while proc.poll() is None and time.monotonic() < deadline:
                if _delivered_in_open_attempt(run_dir):
                    break
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 2.5))  # mid-episode, after the actor saw something
        if proc.poll() is not None:
            break  # everything finished before this kill point
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        kills += 1
        # Workers and actors die with the coordinator: wait for it, with a generous bound.
        left = _actors_left_after_kill(str(mailbox))
        assert left == [], f"an actor outlived the killed coordinator (kill {kills}): {left}"
        started = run_dir.glob("episodes/*/events.jsonl")
        if any(b'"actor_started"' in p.read_bytes() for p in started):
            assert sandbox_processes_left(run_dir) == [], "a sandbox outlived the kill"
        workers = [_described(pid) for pid in _left_after(str(run_dir))]
        assert workers == [], f"a worker outlived the killed coordinator (kill {kills}): {workers}"
        _check_evidence(run_dir, completed)
    final = subprocess.run(again, capture_output=True, text=True, timeout=900)
    assert final.returncode == 0, final.stderr[-3000:]
    report = json.loads(final.stdout)["overall"]
    assert (report["selected"], report["unattempted"]) == (4, 0)
    assert report["completed"] + report["errored"] == 4
    _check_evidence(run_dir, completed)
    interrupted = [
        p
        for p, _ in completed.items()
        if json.loads((run_dir / "episodes" / p / "result.json").read_text())["outcome"] == "error"
    ]
    assert kills == KILLS and interrupted, "the kills never landed mid-episode"
    print(
        f"kills: {kills}, interrupted attempts recorded: {len(interrupted)}, "
        f"attempt directories: {len(list((run_dir / 'episodes').iterdir()))}, "
        f"final errored cases: {report['errored']}"
    )
