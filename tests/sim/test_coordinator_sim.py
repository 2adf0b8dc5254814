"""The coordinator on the real simulator: parallel blinded launches, resume after SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    actor_started_events,
    copied_actor,
    launch_command,
    leaks_under,
    mailroom_exe,
    sandbox_processes_left,
    worker_processes,
)
from mailroom.mailbox.schemas import schema_errors


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> str:
    """`python3 probe_actor.py`: the system's Python runs it inside the sandbox."""
    return f"python3 {copied_actor(tmp_path_factory.mktemp('actors'), 'probe_actor.py')}"


def _plan(tmp: Path, *args: str) -> Path:
    out = tmp / "plan.json"
    subprocess.run(
        [mailroom_exe(), "plan", *args, "--out", str(out)], check=True, capture_output=True
    )
    return out


def _results(run_dir: Path) -> dict[str, dict[str, Any]]:
    return {
        p.parent.name: json.loads(p.read_text())
        for p in sorted(run_dir.glob("episodes/*/result.json"))
    }


@pytest.fixture(scope="module")
def development_run(
    tmp_path_factory: pytest.TempPathFactory, module_mailbox_root: Path, probe: str
) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("launch")
    plan = _plan(tmp, "--kind", "development")
    run_dir, mailbox = tmp / "secret-run-dir", module_mailbox_root / "mb"
    proc = subprocess.run(
        launch_command(
            plan,
            run_dir,
            mailbox,
            f"{probe} {{endpoint}}",
            "--workers",
            "2",
            "--max-policy-calls",
            "4",
            "--replan-interval",
            "5",
            "--json",
        ),
        capture_output=True,
        text=True,
        timeout=900,
    )
    return {"proc": proc, "run_dir": run_dir, "mailbox": mailbox}


def test_development_plan_completes_with_denominators_that_add_up(
    development_run: dict[str, Any],
) -> None:
    proc = development_run["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    results = _results(development_run["run_dir"])
    assert len(results) == 5
    for doc in results.values():
        assert schema_errors("mailroom.episode_result/v8", doc) == []
    o = report["overall"]
    assert o["selected"] == 5 == o["completed"] + o["errored"] + o["unattempted"]
    assert o["completed"] == o["success"] + o["failure"]
    assert report["suites"]["libero_10"]["selected"] == 5
    # Confined by default, and said so.
    assert (o["not_confined"], report["confinement_modes"]) == (0, {"sandbox": 5})
    assert all(
        doc["confinement"] == {"mode": "sandbox", "network": "none"} for doc in results.values()
    )
    manifest = json.loads((development_run["run_dir"] / "manifest.json").read_text())
    assert manifest["confinement"]["mode"] == "sandbox"
    assert manifest["confinement"]["tool"]["name"] == "bubblewrap"


def test_a_killed_actor_errors_its_own_episode_only(development_run: dict[str, Any]) -> None:
    results = _results(development_run["run_dir"])
    by_task = {doc["case"]["task_index"]: doc for doc in results.values()}
    dead = by_task.pop(2)  # the actor kills itself on the only "moka" instruction
    assert dead["outcome"] == "error" and dead["termination"] == "policy_error"
    assert [(e["kind"], e["code"]) for e in dead["errors"]] == [("policy_error", "actor_exited")]
    assert dead["counters"]["executed_controls"] == 5
    for doc in by_task.values():
        assert doc["outcome"] == "failure" and doc["truncation"] == "policy_call_cap"
        assert (doc["counters"]["policy_calls"], doc["counters"]["executed_controls"]) == (4, 20)


def test_actors_get_a_scrubbed_environment_and_nothing_that_names_the_run(
    development_run: dict[str, Any],
) -> None:
    run_dir: Path = development_run["run_dir"]
    probes = [
        json.loads(p.read_text()) for p in development_run["mailbox"].glob("*/scratch/probe.json")
    ]
    assert len(probes) == 5
    for probe in probes:
        endpoint = Path(probe["argv"][1])
        # bubblewrap adds PWD, the working directory: scratch/, as HOME.
        assert set(probe["env"]) == {"PATH", "LANG", "HOME", "PWD"}
        assert probe["env"]["HOME"] == probe["env"]["PWD"] == probe["cwd"]
        assert probe["cwd"] == str(endpoint / "scratch")
        assert str(endpoint) in probe["stdin"]  # the rendered instructions, nothing else
        given = json.dumps(probe)
        for private in (str(run_dir), run_dir.name, "libero", "20260907", "scripted_diagnostic"):
            assert private not in given
    assert sandbox_processes_left(run_dir) == []
    assert (
        leaks_under(
            development_run["mailbox"],
            [
                run_dir.name,
                "libero_10",
                "LIVING_ROOM",
                "KITCHEN",
                ".bddl",
                "20260907",
                "init_state",
            ],
        )
        == []
    )


def test_sigkill_mid_episode_then_resume(tmp_path: Path, mailbox_root: Path, probe: str) -> None:
    plan = _plan(tmp_path, "--kind", "task_coverage", "--suite", "libero_10", "--task-ids", "0,1,3")
    run_dir, mailbox = tmp_path / "run", mailbox_root / "mb"
    coordinator = subprocess.Popen(
        launch_command(
            plan,
            run_dir,
            mailbox,
            f"{probe} {{endpoint}} --delay 0.4",
            "--workers",
            "1",
            "--slots",
            "1",  # in order: the first case ends before the second starts
            "--max-policy-calls",
            "3",
            "--json",
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    second = run_dir / "episodes" / "libero_10-t001-i00-o0-s20260907-a1"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        events = second / "events.jsonl"
        if events.exists() and b"observation_published" in events.read_bytes():
            break
        assert coordinator.poll() is None, "the launch ended before it could be interrupted"
        time.sleep(0.05)
    first_result = (
        run_dir / "episodes" / "libero_10-t000-i00-o0-s20260907-a1" / "result.json"
    ).read_bytes()
    os.kill(coordinator.pid, signal.SIGKILL)
    coordinator.wait()
    assert sandbox_processes_left(run_dir) == [], "an actor outlived the run"
    assert not (second / "result.json").exists()

    resumed = subprocess.run(
        [mailroom_exe(), "resume", str(run_dir), "--json", "--mailbox-root", str(mailbox)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    report = json.loads(resumed.stdout)["overall"]
    assert (report["selected"], report["completed"], report["unattempted"]) == (3, 2, 0)
    assert (report["failure"], report["errored"]) == (2, 1)
    results = _results(run_dir)
    assert sorted(results) == [
        "libero_10-t000-i00-o0-s20260907-a1",
        "libero_10-t001-i00-o0-s20260907-a1",  # kept: its actor had seen observations
        "libero_10-t003-i00-o0-s20260907-a1",
    ]
    interrupted = results["libero_10-t001-i00-o0-s20260907-a1"]
    assert [e["kind"] for e in interrupted["errors"]] == ["interrupted"]
    # The rebuilt counters against what happened, seen in the files themselves: the
    # observations published to its endpoint, the responses claimed and kept.
    endpoint = Path(json.loads((second / "endpoint.json").read_text())["endpoint"])
    published = len(list((endpoint / "outbox").glob("obs-*.json")))
    claimed = len(list((second / "responses").iterdir()))
    counters = interrupted["counters"]
    assert published >= 1 and counters["policy_calls"] == claimed
    assert claimed in (published - 1, published)
    assert counters["action_decisions"] == claimed  # the probe only ever acts
    assert counters["executed_controls"] == 5 * (published - 1)
    assert (
        run_dir / "episodes" / "libero_10-t000-i00-o0-s20260907-a1" / "result.json"
    ).read_bytes() == first_result


def test_audit_of_the_launched_run_finds_no_leak(development_run: dict[str, Any]) -> None:
    run_dir: Path = development_run["run_dir"]
    audit = subprocess.run(
        [mailroom_exe(), "audit", str(run_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr
    verdict = json.loads(audit.stdout)
    assert verdict["leaks"] == [] and verdict["clean"] is True
    assert verdict["attempts_scanned"] == 5 and verdict["files_scanned"] > 5 * 4
    assert json.loads((run_dir / "audit.json").read_text()) == verdict
    started = actor_started_events(run_dir)
    assert len(started) == 5
    assert all(set(e["env"]) == {"PATH", "LANG", "HOME"} for e in started)
    assert all(e["confinement"]["mode"] == "sandbox" for e in started)


def test_a_worker_lost_mid_episode_is_recorded_and_the_rest_resumes(
    tmp_path: Path, mailbox_root: Path, probe: str
) -> None:
    plan = _plan(tmp_path, "--kind", "fast")
    run_dir, mailbox = tmp_path / "run", mailbox_root / "mb"
    coordinator = subprocess.Popen(
        launch_command(
            plan,
            run_dir,
            mailbox,
            f"{probe} {{endpoint}} --delay 0.3",
            "--workers",
            "1",
            "--slots",
            "1",  # one case at a time: the other has not started when the worker dies
            "--max-policy-calls",
            "6",
            "--json",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = run_dir / "episodes" / "libero_10-t000-i00-o0-s20260907-a1" / "events.jsonl"
    deadline = time.monotonic() + 300
    while not (first.exists() and b"observation_published" in first.read_bytes()):
        assert time.monotonic() < deadline and coordinator.poll() is None
        time.sleep(0.05)
    workers = worker_processes(coordinator.pid)
    assert len(workers) == 1
    os.kill(workers[0], signal.SIGKILL)
    out, err = coordinator.communicate(timeout=300)
    assert coordinator.returncode == 4, err[-2000:]  # incomplete: one case never ran
    report = json.loads(out)["overall"]
    assert (report["errored"], report["unattempted"]) == (1, 1)
    lost = json.loads(first.with_name("result.json").read_text())
    assert [(e["kind"], e["code"]) for e in lost["errors"]] == [
        ("infrastructure_error", "worker_lost")
    ]
    # Its counters, rebuilt from its event log, against the files: what was published to
    # its endpoint and what was claimed from it.
    attempt = first.parent
    endpoint = Path(json.loads((attempt / "endpoint.json").read_text())["endpoint"])
    published = len(list((endpoint / "outbox").glob("obs-*.json")))
    claimed = len(list((attempt / "responses").iterdir()))
    assert published >= 1 and lost["counters"]["policy_calls"] == claimed
    assert lost["counters"]["executed_controls"] == 5 * (published - 1)
    assert sandbox_processes_left(run_dir) == []  # the lost worker's actor went with it
    resumed = subprocess.run(
        [mailroom_exe(), "resume", str(run_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert json.loads(resumed.stdout)["overall"]["unattempted"] == 0


def test_a_conflicting_second_launch_is_refused(
    development_run: dict[str, Any], probe: str
) -> None:
    run_dir: Path = development_run["run_dir"]
    manifest = (run_dir / "manifest.json").read_bytes()
    plan = run_dir / "plan.json"
    refused = subprocess.run(
        launch_command(
            plan,
            run_dir,
            development_run["mailbox"],
            f"{probe} {{endpoint}}",
            "--max-policy-calls",
            "9",
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 5, refused.stderr[-2000:]
    said = " ".join(refused.stderr.split())
    assert "settings.max_policy_calls" in said and "Traceback" not in said
    assert (run_dir / "manifest.json").read_bytes() == manifest


def test_report_names_a_corrupt_result_and_counts_it_errored(
    development_run: dict[str, Any], tmp_path: Path
) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(development_run["run_dir"], copy)
    victim = sorted(copy.glob("episodes/*/result.json"))[0]
    victim.write_bytes(victim.read_bytes()[:100])  # truncated mid-document
    done = subprocess.run(
        [mailroom_exe(), "report", str(copy), "--json"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 4
    report = json.loads(done.stdout)
    assert [c["file"] for c in report["corrupt_results"]] == [str(victim)]
    o = report["overall"]
    assert (o["completed"], o["errored"], o["corrupt"], o["unattempted"]) == (3, 2, 1, 0)
