"""SIGKILL the coordinator at 20 random points of a multi-episode run, resuming each time.

After every kill: no completed episode lost, changed or duplicated; every result that
exists is complete and valid; no actor or worker survives. At the end every case has
exactly one result, and attempts cut short after their actor saw observations are
recorded as interrupted.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, mailroom_exe
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.video import probe_video

pytestmark = [pytest.mark.sim, pytest.mark.slow]

KILLS = 20
ACTOR = f"{sys.executable} {REPO / 'AgentPolicies/scripted_diagnostic/actor.py'} {{endpoint}}"


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


def _check_evidence(run_dir: Path, completed: dict[str, str]) -> None:
    per_case: dict[str, int] = {}
    for result_file in run_dir.glob("episodes/*/result.json"):
        data = result_file.read_bytes()
        doc = json.loads(data)
        assert schema_errors("mailroom.episode_result/v1", doc) == []
        attempt = result_file.parent.name
        digest = hashlib.sha256(data).hexdigest()
        assert completed.setdefault(attempt, digest) == digest, f"{attempt} changed"
        per_case[doc["case_id"]] = per_case.get(doc["case_id"], 0) + 1
        if doc["outcome"] != "error":
            steps = (result_file.parent / "steps.jsonl").read_text().splitlines()
            assert len(steps) == doc["counters"]["executed_controls"]
            for video in (result_file.parent / "videos").glob("*.mp4"):
                assert probe_video(video).frames == doc["counters"]["executed_controls"]
    assert all(n == 1 for n in per_case.values()), per_case
    for video in run_dir.glob("episodes/*/videos/*.mp4"):
        probe_video(video)  # a final name is always a whole, decodable file


def test_twenty_sigkills_then_resume(tmp_path: Path) -> None:
    rng = random.Random(20261129)
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
            "0,1,2,3,4,5",
            "--out",
            str(plan),
        ],
        check=True,
        capture_output=True,
    )
    run_dir, mailbox = tmp_path / "soak-run", tmp_path / "soak-mb"
    first = [
        mailroom_exe(),
        "launch",
        str(plan),
        "--profile",
        "scripted_diagnostic",
        "--run-dir",
        str(run_dir),
        "--mailbox-root",
        str(mailbox),
        "--workers",
        "1",
        "--max-policy-calls",
        "6",
        "--response-timeout",
        "60",
        "--actor",
        ACTOR,
        "--json",
    ]
    again = [mailroom_exe(), "resume", str(run_dir), "--json", "--mailbox-root", str(mailbox)]
    completed: dict[str, str] = {}
    kills = 0
    while kills < KILLS:
        command = again if (run_dir / "manifest.json").exists() else first
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 7.0))
        if proc.poll() is not None:
            break  # everything finished before this kill point
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        kills += 1
        time.sleep(0.5)
        assert _survivors(str(mailbox)) == [], "an actor outlived the killed coordinator"
        assert _survivors(str(run_dir)) == [], "a worker outlived the killed coordinator"
        _check_evidence(run_dir, completed)
    final = subprocess.run(again, capture_output=True, text=True, timeout=900)
    assert final.returncode == 0, final.stderr[-3000:]
    report = json.loads(final.stdout)["overall"]
    assert (report["selected"], report["completed"], report["unattempted"]) == (6, 6, 0)
    _check_evidence(run_dir, completed)
    results = [json.loads(p.read_text()) for p in run_dir.glob("episodes/*/result.json")]
    assert len(results) == 6
    interrupted = [r for r in results if r["outcome"] == "error"]
    assert all(e["kind"] == "interrupted" for r in interrupted for e in r["errors"])
    assert report["errored"] == len(interrupted)
    print(
        f"kills: {kills}, interrupted attempts: {len(interrupted)}, "
        f"attempt directories: {len(list((run_dir / 'episodes').iterdir()))}"
    )
