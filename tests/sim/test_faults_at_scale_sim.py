"""Faults at scale: many live parked episodes of slow actors, some of them attacking,
a worker SIGKILLed mid-soak, then `resume` (issue: hundreds of live episodes survive
faults).

A real `mailroom launch` on the real simulator, two workers, as many cases live at once
as they admit (parked on their task's simulators), each actor sandboxed
(`tests/support/actors/soak_actor.py`). As each endpoint appears the test hands its actor a role
(in the inbox, under a name the orchestrator never reads): half are plain, the rest
cycle through hostile responses, a self-kill, writing past the scratch quota, allocating
past the memory ceiling and forking until the process cap; one floods its inbox with
names like responses all episode. Once every case has started and one has ended, or a
quarter have ended, one worker is SIGKILLed; the launch ends incomplete (or complete,
the other worker taking the rest) and `resume` runs what was never started.

Then: every case has exactly one result and one attempt (no attempt re-shown); each
attacked episode ends as its attack says and no other episode is touched; every plain
episode that completed is re-executed alone by `mailroom replay` and delivers the same
bytes; no sandbox, worker or mount is left. The others' queueing delay while the flood
ran and while it did not is printed (a figure, not an assertion: docs/reliability.md).

`make test` runs 11 cases (each role of the cycle once, and the flood) thinking ~2 s a
decision; MAILROOM_SOAK_LIVE=200 (and
MAILROOM_SOAK_THINK_S, MAILROOM_SOAK_CALLS, MAILROOM_SOAK_ATTACK_AT) is the documented
run (docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from conftest import REPO, copied_actor, mailroom_exe, sandbox_processes_left, worker_processes
from recorded_events import attempt_events

LIVE = int(os.environ.get("MAILROOM_SOAK_LIVE", "11"))
THINK_S = float(os.environ.get("MAILROOM_SOAK_THINK_S", "2"))
MAX_POLICY_CALLS = int(os.environ.get("MAILROOM_SOAK_CALLS", "4"))
# The decision at which attacks begin: a later one keeps the attacked episodes live
# while the others start, so that a long run holds every case live at once.
ATTACK_AT = int(os.environ.get("MAILROOM_SOAK_ATTACK_AT", "1"))
# Half plain; the attacks in turn; the one flooding actor comes three quarters of the way
# through the endpoints (its episode runs when most others are past their starts).
CYCLE: tuple[str, ...] = ("normal", "hostile", "normal", "killed", "normal", "quota")
CYCLE += ("normal", "memory", "normal", "fork")
FLOODER_AT = LIVE * 3 // 4
STARTS_S = 5.0  # a decision served this soon after an episode's start waited for the start
# Generous bounds of waits for events, never timing guesses.
WAIT_S = max(1800.0, 12 * THINK_S * MAX_POLICY_CALLS)
RESPONSE_TIMEOUT_S = max(120.0, 3 * THINK_S)  # an actor thinks up to 1.5 x THINK_S


def _plan(tmp_path: Path) -> Path:
    tasks = max(1, -(-LIVE // 50))  # 50 released states a task
    states = -(-LIVE // tasks)
    plan = tmp_path / "plan.json"
    subprocess.run(
        [
            *(mailroom_exe(), "plan", "--kind", "task_coverage", "--suite", "libero_10"),
            *("--task-ids", ",".join(str(t) for t in range(tasks))),
            *("--init-states", ",".join(str(s) for s in range(states))),
            *("--out", str(plan)),
        ],
        check=True,
        capture_output=True,
    )
    return plan


def _profile(tmp_path: Path) -> Path:
    """The diagnostic profile with small ceilings: 256 MiB of memory, 16 MiB and 2,000
    entries of writable space, 64 processes."""
    document = json.loads((REPO / "agents" / "scripted_diagnostic" / "profile.json").read_text())
    document["profile"] = "soak_diagnostic"
    document["limits"].update(
        memory_mb=256, scratch_quota_mb=16, scratch_quota_files=2000, processes=64
    )
    path = tmp_path / "soak_profile" / "profile.json"
    path.parent.mkdir()
    path.write_text(json.dumps(document))
    return path


class RoleGiver(threading.Thread):
    """Hands each new endpoint's actor its role, in order of appearance."""

    def __init__(self, mailbox: Path) -> None:
        super().__init__(daemon=True)
        self.mailbox = mailbox
        self.roles: dict[str, str] = {}  # endpoint name -> role
        self.done = threading.Event()

    def role_of(self, index: int) -> str:
        return "flood" if index == FLOODER_AT else CYCLE[index % len(CYCLE)]

    def run(self) -> None:
        while not self.done.is_set():
            for endpoint in self._by_appearance():
                inbox = endpoint / "inbox"
                if endpoint.name in self.roles or not inbox.is_dir():
                    continue
                role = self.role_of(len(self.roles))
                tmp = inbox / ".role.tmp"
                try:
                    tmp.write_text(role)
                    tmp.chmod(0o644)
                    tmp.rename(inbox / "role.txt")
                except FileNotFoundError:
                    continue  # its episode ended (its worker killed) before it had a role
                self.roles[endpoint.name] = role
            time.sleep(0.02)

    def _by_appearance(self) -> list[Path]:
        """The endpoints there now, oldest first (one may go while they are listed)."""
        found: list[tuple[float, Path]] = []
        if self.mailbox.is_dir():
            for endpoint in self.mailbox.iterdir():
                try:
                    found.append((endpoint.stat().st_mtime, endpoint))
                except FileNotFoundError:
                    continue
        return [endpoint for _, endpoint in sorted(found)]


def _results(run_dir: Path) -> dict[str, dict[str, Any]]:
    return {
        p.parent.name: json.loads(p.read_text())
        for p in (run_dir / "episodes").glob("*/result.json")
    }


def _errors(result: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["kind"], e["code"]) for e in result["errors"]]


def test_live_episodes_survive_attacks_and_a_killed_worker(
    tmp_path: Path, mailbox_root: Path
) -> None:
    actor = copied_actor(tmp_path / "actors", "soak_actor.py")
    run_dir, mailbox = tmp_path / "run", mailbox_root / "soak"
    giver = RoleGiver(mailbox)
    giver.start()
    launch = subprocess.Popen(
        [
            *(mailroom_exe(), "launch", str(_plan(tmp_path))),
            *(
                "--profile",
                str(_profile(tmp_path)),
                "--actor",
                f"python3 {actor} {{endpoint}} {THINK_S} {ATTACK_AT}",
            ),
            *("--run-dir", str(run_dir), "--mailbox-root", str(mailbox)),
            *("--workers", "2", "--max-policy-calls", str(MAX_POLICY_CALLS)),
            *("--response-timeout", str(RESPONSE_TIMEOUT_S), "--json"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + WAIT_S
        # The kill: once every case has started (its actor handed a role) and one has
        # ended, or a quarter have ended, whichever comes first.
        while not (
            len(_results(run_dir)) >= LIVE // 4
            or (len(giver.roles) >= LIVE and len(_results(run_dir)) >= 1)
        ):
            assert launch.poll() is None, launch.stderr.read() if launch.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.2)
        workers = worker_processes(launch.pid)
        assert len(workers) == 2
        live_before_kill = len(giver.roles) - len(_results(run_dir))
        os.kill(workers[0], signal.SIGKILL)
        _, err = launch.communicate(timeout=WAIT_S)
    finally:
        if launch.poll() is None:
            launch.kill()
            launch.wait()
    assert launch.returncode in (0, 4), err[-3000:]
    resumed = subprocess.run(
        [mailroom_exe(), "resume", str(run_dir), "--json", "--mailbox-root", str(mailbox)],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    giver.done.set()
    giver.join(timeout=10)
    assert resumed.returncode in (0, 4), resumed.stderr[-3000:]
    overall = json.loads(resumed.stdout)["overall"]
    assert (overall["selected"], overall["unattempted"]) == (LIVE, 0)

    # Exactly one result and one attempt per case: nothing re-shown.
    results = _results(run_dir)
    attempts = sorted(p.name for p in (run_dir / "episodes").iterdir())
    assert len(results) == len(attempts) == LIVE
    assert all(a.endswith("-a1") for a in attempts)

    # Each attempt's role, from what its actor kept (its endpoint, kept for the audit); an
    # attempt the killed worker took but had not yet given an endpoint has none.
    role_of: dict[str, str] = {}
    for attempt in attempts:
        kept = run_dir / "episodes" / attempt / "endpoint.json"
        if kept.exists():
            role_of[attempt] = giver.roles[Path(json.loads(kept.read_text())["endpoint"]).name]
        else:
            role_of[attempt] = "never started"
    lost = {a for a, r in results.items() if ("infrastructure_error", "worker_lost") in _errors(r)}
    assert lost, "the worker was killed with none of its episodes live"
    assert {a for a, role in role_of.items() if role == "never started"} <= lost
    for attempt, result in results.items():
        role, errors = role_of[attempt], _errors(result)
        if attempt in lost:
            assert errors == [("infrastructure_error", "worker_lost")]
            continue
        if role == "killed":
            assert errors == [("policy_error", "actor_exited")], (attempt, errors)
        elif role == "memory":
            assert errors == [("policy_error", "memory_limit")], (attempt, errors)
        elif role == "hostile":
            assert result["counters"]["rejected_responses"] >= 1, (attempt, result["counters"])
        else:  # normal, flood, quota, fork: untouched by any attack
            assert errors == [], (attempt, role, errors)
            assert result["counters"]["policy_calls"] == MAX_POLICY_CALLS
    # The quota actor's write failed in it (the kernel's bound), as it kept saying.
    for attempt in attempts:
        if role_of[attempt] == "quota" and attempt not in lost:
            mapping = json.loads((run_dir / "episodes" / attempt / "endpoint.json").read_text())
            said = Path(mapping["endpoint"]) / "scratch" / "quota.txt"
            assert said.read_text() == "No space left on device", attempt
    assert {role_of[a] for a in attempts} >= {
        "normal",
        "hostile",
        "killed",
        "quota",
        "memory",
        "fork",
    }

    # The plain episodes that completed deliver the bytes they would alone.
    plain = sorted(a for a in attempts if role_of[a] == "normal" and a not in lost)
    assert plain
    replayed = subprocess.run(
        [
            mailroom_exe(),
            "replay",
            str(run_dir),
            "--json",
            *(x for a in plain for x in ("--case", a)),
        ],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert replayed.returncode == 0, replayed.stdout[-3000:] + replayed.stderr[-3000:]
    verdicts = json.loads(replayed.stdout)
    print(f"replay: {len(plain)} plain attempts, {json.dumps(verdicts)[:300]}")

    assert sandbox_processes_left(run_dir) == []
    _print_figures(run_dir, role_of, lost, live_before_kill)


def _print_figures(
    run_dir: Path, role_of: dict[str, str], lost: set[str], live_before_kill: int
) -> None:
    """The others' queueing delay while the flood ran, and while it did not: over the
    decisions served apart from episode starts (a start holds the serving thread up to a
    few seconds, `docs/parking.md`), so that the flood is what differs."""
    flood_windows: list[tuple[float, float]] = []
    served: list[tuple[float, float]] = []
    starts: list[float] = []
    spans: list[tuple[float, int]] = []  # an actor's start (+1) and its attempt's end (-1)
    for attempt, role in role_of.items():
        if role == "never started":
            continue
        events = attempt_events(run_dir / "episodes" / attempt)
        starts += [e["t"] for e in events if e["event"] == "episode_started"]
        began = [e["t"] for e in events if e["event"] == "actor_started"]
        if began:
            spans += [(began[0], 1), (events[-1]["t"], -1)]
        if role == "flood":
            started = next((e["t"] for e in events if e["event"] == "actor_started"), None)
            stopped = next((e["t"] for e in events if e["event"] == "actor_stopped"), None)
            if started and stopped:
                flood_windows.append((started, stopped))
        elif role == "normal" and attempt not in lost:
            served += [
                (e["t"], e["queue_delay_ms"]) for e in events if e["event"] == "decision_served"
            ]
    live = peak = 0
    for _, change in sorted(spans):
        live += change
        peak = max(peak, live)
    served = [(at, d) for at, d in served if not any(0 <= at - s <= STARTS_S for s in starts)]
    during = [d for at, d in served if any(s <= at <= e for s, e in flood_windows)]
    apart = [d for at, d in served if not any(s <= at <= e for s, e in flood_windows)]

    def p95(values: list[float]) -> float | None:
        return statistics.quantiles(values, n=20)[-1] if len(values) >= 2 else None

    print(
        json.dumps(
            {
                "cases": LIVE,
                "most_live_at_once": peak,
                "first_to_last_start_s": round(max(starts) - min(starts), 1) if starts else None,
                "live_when_the_worker_was_killed": live_before_kill,
                "lost_with_the_worker": len(lost),
                "queue_delay_ms_p95_during_flood": p95(during),
                "queue_delay_ms_p95_apart_from_flood": p95(apart),
                "decisions_during_flood": len(during),
                "decisions_apart_from_flood": len(apart),
            }
        )
    )
