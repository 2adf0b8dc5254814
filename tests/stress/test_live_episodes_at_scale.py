"""300 live episodes in one real worker: nothing runs out, and each costs what
`campaign/capacity/kernel.py` says.

One worker (the campaign's own `run_work`, a spawned process) with 300 slots, the
simulator-free fake simulator (a cheap one per episode: this test is about what an
episode holds besides physics), and 300 real bubblewrap sandboxes, each running
tests/support/actors/held_actor.py: it answers its first observation at once, then holds its
second answer until the test opens its gate. The test opens the gates only once every
episode has published its second observation and none has closed (all 300 live at
once, after a decision each), and measures the worker and the machine at that moment,
and at 150 live on the way (the per-episode costs are the slope between the two).
Then every episode ends with the actor's `stop`, exactly one result each, and no
process survives.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import resource
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import copied_actor, sandbox_processes_left
from mailroom.orchestrator.actors.confinement import ConfinementSettings
from mailroom.orchestrator.actors.launcher import profile_launcher
from mailroom.orchestrator.actors.lifetime import INIT_NAME
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.actors.profiles import profile_dir
from mailroom.orchestrator.campaign.capacity import kernel as kc
from mailroom.orchestrator.campaign.capacity.kernel_limits import (
    KernelLimits,
    descendants,
    holdings,
    machine_tasks,
    namespaces,
)
from mailroom.orchestrator.campaign.coordinator import LaunchConfig, Work, WorkOutcome, run_work
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.sim.fake import FakeSimulator

PROFILE = "scripted_diagnostic"
LIVE = 300
MIDWAY = 150
INHERITED_SOFT = 1024
# A start under way holds up to this many descriptors (measured: 16 to 22).
START_FDS = 30
# Generous bounds on events, never a guess at how fast they come.
ALL_LIVE_WITHIN_S = 900.0
ALL_DONE_WITHIN_S = 600.0


def _cases(n: int) -> list[Case]:
    return [
        Case(suite="libero_10", task_index=t, init_state_index=s, seed=7)
        for t in range(10)
        for s in range(n // 10)
    ]


def _count(mailbox: Path, pattern: str) -> int:
    return sum(1 for _ in mailbox.glob(pattern))


def _open_files_limit(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no open-files line in /proc/<pid>/limits")


def _measure(worker: int, mailbox: Path) -> dict[str, Any]:
    """The worker's holdings and what runs below it, now, between two counts of the
    episodes started (first observation published) before and after."""
    started = _count(mailbox, "*/outbox/obs-1.json")
    held = holdings(worker)
    # The init of the worker's pid namespace (`actors/lifetime.py`) is one process below
    # it whatever the episodes; the rest is theirs.
    everything = descendants(worker)
    below = [p for p in everything if p.name != INIT_NAME]
    bwrap = [p.pid for p in below if p.name == "bwrap"]
    return {
        "started": (started, _count(mailbox, "*/outbox/obs-1.json")),
        "fds": held.fds,
        "inotify_instances": held.inotify_instances,
        "inotify_watches": held.inotify_watches,
        "threads": held.threads,
        "processes_below": len(below),
        "bwrap": len(bwrap),
        "actors": sum(1 for p in below if p.name != "bwrap"),
        "tasks_below": sum(p.threads for p in below),
        "namespaces": namespaces(bwrap),
        "open_files_limit": _open_files_limit(worker),
        "inits": len(everything) - len(below),
    }


def _quiet(worker: int, mailbox: Path, samples: int = 10, every_s: float = 0.3) -> dict[str, Any]:
    """The worker's holdings with every episode waiting at its gate: the least of a few
    samples, so that a descriptor or thread of work still finishing when the last episode
    published (its deferred event, a file being closed: slower with other tests beside
    this one) is not counted as an episode's."""
    taken = []
    for _ in range(samples):
        taken.append(_measure(worker, mailbox))
        time.sleep(every_s)
    return min(taken, key=lambda sample: (sample["fds"], sample["threads"]))


@contextlib.contextmanager
def _gates(mailbox: Path) -> Iterator[threading.Event]:
    """Opens every endpoint's gate (its inbox/gate) once the event is set, and keeps
    opening new ones; at the end, whatever happened, every gate is opened."""
    opened = threading.Event()
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            if opened.is_set():
                for inbox in mailbox.glob("*/inbox"):
                    with contextlib.suppress(OSError):  # an endpoint being removed
                        (inbox / "gate").touch(exist_ok=True)
            stop.wait(0.2)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        yield opened
    finally:
        opened.set()
        time.sleep(0.5)
        stop.set()
        server.join(timeout=10)


@pytest.fixture
def low_soft_descriptor_limit() -> Iterator[int]:
    """This process's soft descriptor limit at 1,024 (a common default, far below what
    300 live episodes hold) while the test runs: the worker inherits it, and must raise
    it to the hard limit to get there. The hard limit is handed out."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (INHERITED_SOFT, hard))
    try:
        yield hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_300_live_episodes_in_one_worker_stay_within_every_limit(
    tmp_path: Path, mailbox_root: Path, low_soft_descriptor_limit: int
) -> None:
    held_actor = copied_actor(tmp_path / "actors", "held_actor.py")
    declaration = json.loads((profile_dir(PROFILE) / "profile.json").read_text("utf-8"))
    limits = ActorLimits.model_validate(declaration["limits"])
    confinement = ConfinementSettings(mode="sandbox")
    actor = ["{python}", str(held_actor), "{endpoint}"]
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    config = LaunchConfig(
        run_dir=run_dir,
        mailbox_root=mailbox_root,
        # Two decisions each: an act at once, then the held stop. Generous deadlines:
        # the second answer waits for every other episode's start.
        settings=RunSettings(max_policy_calls=2, replan_interval=5, response_timeout_s=1800.0),
        record="minimal",
        launcher=profile_launcher(
            actor,
            profile=PROFILE,
            confinement=confinement,
            limits=limits,
            run_dir=run_dir,
            mailbox_root=mailbox_root,
        ),
        limits=limits,
        slots=LIVE,
        simulator=FakeSimulator,
    )
    cases = _cases(LIVE)
    assert len(cases) == LIVE
    heard: list[tuple[str, tuple[Any, ...]]] = []
    outcomes: list[WorkOutcome] = []
    before = {p.pid for p in multiprocessing.active_children()}
    launch = threading.Thread(
        target=lambda: outcomes.append(
            run_work(
                config,
                [Work(c, 1) for c in cases],
                1,
                lambda kind, payload: heard.append((kind, payload)),
            )
        )
    )
    began = time.monotonic()
    served_first = "*/outbox/obs-2.json"  # published after an episode's first decision
    with _gates(mailbox_root) as gates:
        launch.start()
        deadline = time.monotonic() + ALL_LIVE_WITHIN_S
        worker = None
        while worker is None and time.monotonic() < deadline:
            new = [p.pid for p in multiprocessing.active_children() if p.pid not in before]
            worker = new[0] if new else None
            time.sleep(0.05)
        assert worker is not None, "no worker process started"
        samples: dict[int, dict[str, Any]] = {}
        for live in (MIDWAY, LIVE):
            while _count(mailbox_root, served_first) < live and time.monotonic() < deadline:
                assert launch.is_alive(), "the launch ended before its episodes were live"
                time.sleep(0.2)
            assert _count(mailbox_root, served_first) >= live, f"{live} never live at once"
            samples[live] = (
                _measure(worker, mailbox_root) if live < LIVE else _quiet(worker, mailbox_root)
            )
        # All 300 live together: each has published its second observation, none has
        # closed, and each one's sandbox is running.
        reached_s = time.monotonic() - began
        assert _count(mailbox_root, served_first) == LIVE
        assert _count(mailbox_root, "*/outbox/closed.json") == 0
        machine = KernelLimits.read()
        processes, threads = machine_tasks()
        at = samples[LIVE]
        gates.set()
        launch.join(timeout=ALL_DONE_WITHIN_S)
    done_s = time.monotonic() - began
    assert not launch.is_alive(), "the episodes did not all end"
    print(
        f"\n{LIVE} live after {reached_s:.0f} s, all done after {done_s:.0f} s; "
        f"at {MIDWAY}: {_shown(samples[MIDWAY])}; at {LIVE}: {_shown(at)}; "
        f"machine: {processes} processes, {threads} threads; limits {machine}"
    )

    # --- what the worker and the machine held with 300 live -------------------------
    # The base plus each started episode's cost, and at most one start under way (one
    # starter thread): its folders, pipes and what it hands bubblewrap, at most
    # START_FDS descriptors, and its 2 output threads (a finisher or two at the end).
    for sample in samples.values():
        low, high = sample["started"]
        fds_low = kc.WORKER_BASE_FDS + low * kc.FDS_PER_EPISODE
        assert fds_low <= sample["fds"] <= fds_low + (high - low) * kc.FDS_PER_EPISODE + START_FDS
        threads_low = kc.WORKER_BASE_THREADS + low * kc.THREADS_PER_EPISODE
        assert threads_low <= sample["threads"] <= threads_low + (high - low + 1) * 2
    # With all 300 live and nothing starting: exactly the base and 300 episodes.
    assert at["started"] == (LIVE, LIVE)
    assert at["fds"] == kc.WORKER_BASE_FDS + LIVE * kc.FDS_PER_EPISODE
    assert at["threads"] == kc.WORKER_BASE_THREADS + LIVE * kc.THREADS_PER_EPISODE
    assert at["inotify_instances"] == kc.INOTIFY_INSTANCES_PER_WORKER
    assert at["inotify_watches"] == LIVE * kc.INOTIFY_WATCHES_PER_EPISODE
    assert at["bwrap"] == LIVE * kc.BWRAP_PROCESSES_PER_EPISODE
    assert at["actors"] == LIVE * kc.ACTOR_PROCESSES_PER_EPISODE
    assert at["processes_below"] == at["tasks_below"] == LIVE * kc.PROCESSES_PER_EPISODE
    assert at["inits"] == 1  # the init of the worker's pid namespace
    # One user namespace per sandbox (the outer bubblewraps sit in the host's).
    assert at["namespaces"]["user"] == LIVE * kc.USER_NAMESPACES_PER_EPISODE + 1
    # ... each below its limit.
    assert at["fds"] < at["open_files_limit"]
    assert machine.inotify_watches is not None and machine.inotify_instances is not None
    assert LIVE <= machine.inotify_watches_used < machine.inotify_watches
    assert machine.inotify_instances_used < machine.inotify_instances
    assert machine.pid_max is not None and threads < machine.pid_max
    assert machine.threads_max is not None and threads < machine.threads_max
    if machine.user_processes is not None:
        assert machine.user_processes_used < machine.user_processes
    assert machine.user_namespaces is not None
    assert at["namespaces"]["user"] < machine.user_namespaces
    # The worker raised its soft descriptor limit to the hard one, and said so.
    [raised] = [payload for kind, payload in heard if kind == "open_files_raised"]
    _, _, soft_before, soft, hard = raised
    assert (soft_before, soft, hard) == (INHERITED_SOFT, hard, low_soft_descriptor_limit)
    assert at["open_files_limit"] == hard
    assert at["fds"] > INHERITED_SOFT

    # --- then every episode ends, once, and nothing survives ------------------------
    [outcome] = outcomes
    assert outcome.lost == [] and outcome.unrecorded == []
    results = [json.loads(p.read_text()) for p in run_dir.glob("episodes/*/result.json")]
    assert len(results) == LIVE
    assert len({r["attempt_id"] for r in results}) == LIVE
    assert {c.attempt_id(1) for c in cases} == {r["attempt_id"] for r in results}
    assert {(r["outcome"], r["termination"]) for r in results} == {("failure", "actor_stop")}
    assert all(r["counters"]["policy_calls"] == 2 for r in results)
    finished = [p for kind, p in heard if kind == "finished"]
    assert len(finished) == LIVE and len({(p[0], p[1]) for p in finished}) == LIVE
    assert sandbox_processes_left(run_dir) == []
    assert descendants(worker) == []


def _shown(sample: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sample.items())
