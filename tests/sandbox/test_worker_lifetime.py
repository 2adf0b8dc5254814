"""No actor outlives its worker: each worker holds its actors in a pid namespace of its
own, whose init exits with the worker (`orchestrator/actors/lifetime.py`).

The stress test runs a real worker (the coordinator's own `_worker_main`, started by fork
to keep 60 starts cheap; the launch test below starts workers by spawn, as `mailroom
launch` does) over short episodes of the fake simulator, three live at once, each actor
in a real bubblewrap sandbox, so that actors keep starting, running and stopping. It
SIGKILLs the worker at a random moment, `KILLS` times (60; `MAILROOM_LIFETIME_KILLS=500`
for the longer run of docs/reliability.md), and more (up to three times as many) until
half that many landed among live sandboxes. Before each kill, every process below the
worker is checked to be inside the worker's pid namespace (or one nested in it). After
each kill, within a generous bound: every process that was below the worker is gone,
no process is left in the worker's namespace or one nested in it, and no process of a
sandbox user the worker started (recorded, or seen below it) is alive.

The others: a sandbox held forever in bubblewrap's set-up window (its inner process
never given a parent-death signal) dies with its worker only when held in a namespace,
the old fault reproduced without one; a launch SIGKILLed whole (a coordinator running
`run_work` with two spawned workers) leaves nothing that was below it; a worker whose
init is killed ends itself and leaves nothing; a worker that is not root starts its
actors as before and says so.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from campaign_builders import diagnostic_actor, launch_config
from conftest import REPO
from mailroom.orchestrator.actors.lifetime import (
    INIT_NAME,
    die_with_this_process,
    hold_children_in_pid_namespace,
    start_in_namespace,
)
from mailroom.orchestrator.actors.outer_identity import (
    OUTER_ID_BASE,
    OUTER_ID_SPAN,
    leftover_processes,
)
from mailroom.orchestrator.campaign.coordinator import (
    LaunchConfig,
    Work,
    WorkOutcome,
    _worker_main,
    group_by_task,
    run_work,
    unheld_warning,
)
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.sim.fake import FakeSimulator
from recorded_events import live_events

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="pid namespaces need root")

KILLS = int(os.environ.get("MAILROOM_LIFETIME_KILLS", "60"))
KILL_WITHIN_S = 1.0  # each kill lands uniformly this long after the first endpoint
GONE_WITHIN_S = 15.0  # generous: the kernel ends a namespace in milliseconds
READY_WITHIN_S = 60.0
NS_GET_PARENT = 0xB702  # ioctl: the parent of a pid namespace
PF_EXITING = 0x4  # a process's flag, in /proc/PID/stat, once it is exiting


def cases(n: int) -> list[Case]:
    return [
        Case(suite="libero_10", task_index=t, init_state_index=s, seed=7)
        for s in range(n // 10)
        for t in range(10)
    ]


def config(run_dir: Path, mailbox: Path, *, slots: int, think_s: float) -> LaunchConfig:
    """Episodes of the fake simulator whose sandboxed actor answers once, then stops."""
    run_dir.mkdir(mode=0o700)
    return launch_config(
        run_dir,
        mailbox,
        actor=diagnostic_actor("--chunks", "1", "--think", str(think_s)),
        settings=RunSettings(max_policy_calls=3, replan_interval=5, response_timeout_s=60.0),
        simulator=FakeSimulator,
        slots=slots,
    )


# --- processes, as /proc shows them ----------------------------------------------------


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    started: int  # clock ticks after boot: with the pid, one process, never a reused pid
    name: str
    uid: int
    zombie: bool  # or exiting


def _read(pid: int) -> Proc | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    name = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2 :].split()
    uid = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("Uid:"))
    # Gone: a zombie, or past the point of no return (PF_EXITING: it runs no code of its
    # own again; an init waits there until its namespace's last zombie is reaped).
    gone = fields[0] in ("Z", "X") or bool(int(fields[6]) & PF_EXITING)
    return Proc(pid, int(fields[1]), int(fields[19]), name, uid, gone)


def processes() -> list[Proc]:
    return [p for p in map(_read, _pids()) if p is not None]


def _pids() -> Iterable[int]:
    return (int(e.name) for e in os.scandir("/proc") if e.name.isdigit())


def below(pid: int) -> list[Proc]:
    """Every live process below `pid`."""
    everything = processes()
    children: dict[int, list[Proc]] = {}
    for proc in everything:
        children.setdefault(proc.ppid, []).append(proc)
    found: list[Proc] = []
    todo = list(children.get(pid, []))
    while todo:
        proc = todo.pop()
        todo += children.get(proc.pid, [])
        if not proc.zombie:
            found.append(proc)
    return found


def still_alive(proc: Proc) -> bool:
    now = _read(proc.pid)
    return now is not None and now.started == proc.started and not now.zombie


def pid_namespaces(pid: int) -> list[int]:
    """The pid namespaces `pid` is in, its own first, then each parent (as inode numbers)."""
    try:
        fd = os.open(f"/proc/{pid}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return []
    chain: list[int] = []
    try:
        while True:
            chain.append(os.fstat(fd).st_ino)
            try:
                parent = fcntl.ioctl(fd, NS_GET_PARENT)
            except OSError:
                break
            os.close(fd)
            fd = parent
    finally:
        os.close(fd)
    return chain


def in_namespaces(namespaces: set[int]) -> list[Proc]:
    """Live processes in any of `namespaces` or in a namespace nested in one."""
    own = pid_namespaces(os.getpid())[0]
    found = []
    for proc in processes():
        if proc.zombie:
            continue
        chain = pid_namespaces(proc.pid)
        if chain and chain[0] != own and namespaces.intersection(chain):
            found.append(proc)
    return found


def sandbox_user(uid: int) -> bool:
    return OUTER_ID_BASE <= uid < OUTER_ID_BASE + OUTER_ID_SPAN


@dataclass
class Held:
    """What was below a worker (or a launch) just before its kill."""

    processes: list[Proc]
    namespaces: set[int]
    namespace_fds: list[int]  # held open: the inode numbers stay theirs while we look
    uids: set[int]

    def close(self) -> None:
        for fd in self.namespace_fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def hold(top: int) -> Held:
    """Everything below `top`; its workers' namespaces from their inits."""
    procs = below(top)
    fds: list[int] = []
    namespaces: set[int] = set()
    for init in (p for p in procs if p.name == INIT_NAME):
        with contextlib.suppress(OSError):
            fd = os.open(f"/proc/{init.pid}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
            fds.append(fd)
            namespaces.add(os.fstat(fd).st_ino)
    uids = {p.uid for p in procs if sandbox_user(p.uid)}
    return Held(procs, namespaces, fds, uids)


def sandboxed(held: Held) -> list[Proc]:
    """The processes of actors below: bubblewrap's, what runs under them, and whatever
    has a sandbox user."""
    by_pid = {p.pid: p for p in held.processes}

    def under_bubblewrap(proc: Proc | None) -> bool:
        while proc is not None:
            if proc.name == "bwrap" or sandbox_user(proc.uid):
                return True
            proc = by_pid.get(proc.ppid)
        return False

    return [p for p in held.processes if under_bubblewrap(p)]


def outside_the_namespaces(held: Held) -> list[Proc]:
    """Actor processes below a worker that are not in its namespace (nor one nested in
    it): none may be. (A worker's other children, a memory probe, are not actors.)"""
    return [
        p
        for p in sandboxed(held)
        if not held.namespaces.intersection(pid_namespaces(p.pid))
        and still_alive(p)  # not gone while we looked
    ]


def actors_started(run_dir: Path) -> list[dict[str, Any]]:
    """Every whole `actor_started` record (a kill may have torn a log's last line)."""
    return [
        event
        for log in run_dir.glob("episodes/*/events.jsonl")
        for event in live_events(log, "actor_started")
    ]


def left_after_kill(held: Held, run_dirs: Iterable[Path]) -> list[str]:
    """What is still there `GONE_WITHIN_S` after a kill (nothing: all went in time)."""
    uids = set(held.uids)
    for run_dir in run_dirs:
        uids |= {e["confinement"]["outer_uid"] for e in actors_started(run_dir)}
    deadline = time.monotonic() + GONE_WITHIN_S
    while True:
        left = [f"below it: {p}" for p in held.processes if still_alive(p)]
        left += [f"in its namespace: {p}" for p in in_namespaces(held.namespaces)]
        left += [f"of sandbox user {u}: {pid}" for u in uids for pid in leftover_processes(u)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


# --- the set-up window, held open ----------------------------------------------------------

BWRAP = shutil.which("bwrap") or "/usr/bin/bwrap"


def _with_marker(marker: str) -> list[Proc]:
    found = []
    for pid in _pids():
        with contextlib.suppress(OSError):
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                proc = _read(pid)
                if proc is not None and not proc.zombie:
                    found.append(proc)
    return found


def _worker_with_a_sandbox_in_set_up(marker: str, in_namespace: bool) -> None:
    """A worker whose one sandbox is forever where bubblewrap 0.8 leaves the window: the
    outer bubblewrap dies with the worker, the inner one never gets a parent-death
    signal (bubblewrap is started without `--die-with-parent`)."""
    if in_namespace:
        assert hold_children_in_pid_namespace().held
    argv = [BWRAP, "--unshare-all", "--unshare-user", "--ro-bind", "/", "/", "--new-session"]
    argv += ["/bin/sh", "-c", f"sleep 600; : {marker}"]
    with start_in_namespace():
        subprocess.Popen(argv, preexec_fn=die_with_this_process())
    time.sleep(600)


@pytest.mark.parametrize("in_namespace", [True, False], ids=["held", "not-held"])
def test_a_sandbox_killed_in_its_set_up_window_dies_only_in_a_namespace(
    in_namespace: bool,
) -> None:
    """Held in the worker's pid namespace, nothing of the sandbox outlives the worker;
    not held (as before), its inner bubblewrap and the actor under it do: the fault the
    namespace removes, reproduced on purpose."""
    marker = f"lifetime-{uuid.uuid4().hex}"
    ctx = multiprocessing.get_context("fork")
    worker = ctx.Process(target=_worker_with_a_sandbox_in_set_up, args=(marker, in_namespace))
    worker.start()
    assert worker.pid is not None
    try:
        deadline = time.monotonic() + READY_WITHIN_S
        while len(_with_marker(marker)) < 3:  # outer and inner bubblewrap, the shell
            assert time.monotonic() < deadline and worker.is_alive(), "no sandbox started"
            time.sleep(0.02)
        os.kill(worker.pid, signal.SIGKILL)
        worker.join()
        deadline = time.monotonic() + GONE_WITHIN_S
        while (left := _with_marker(marker)) and time.monotonic() < deadline:
            time.sleep(0.05)
        if in_namespace:
            assert left == [], f"outlived the worker: {left}"
        else:
            assert sorted(p.name for p in left) == ["bwrap", "sh"], left  # inner, actor
    finally:
        for proc in _with_marker(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
        if worker.is_alive():
            worker.kill()
            worker.join()


# --- the stress test ---------------------------------------------------------------------


def _ready(report_q: Any, within_s: float) -> tuple[str, str]:
    """The worker's account of how it holds its actors (its first report)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            kind, _, _, *rest = report_q.get(timeout=0.5)
            if kind == "actor_lifetime":
                return str(rest[0]), str(rest[1])
    raise AssertionError("the worker never said how it holds its actors")


def _first_endpoint(mailbox: Path, worker: Any, within_s: float) -> None:
    """Until the worker made its first endpoint: its first actor is about to start."""
    deadline = time.monotonic() + within_s
    while not (mailbox.is_dir() and any(mailbox.iterdir())):
        assert time.monotonic() < deadline and worker.is_alive(), "no episode started"
        time.sleep(0.01)


def test_a_worker_killed_at_random_moments_leaves_no_process(
    tmp_path: Path, mailbox_root: Path
) -> None:
    rng = random.Random(20261203)
    ctx = multiprocessing.get_context("fork")
    began = time.monotonic()
    with_sandboxes = sandboxes_at_kills = completed = kill = 0
    # At least KILLS kills, and until half that many landed among live sandboxes: on a
    # busy machine sandboxes start later after the first endpoint, so fewer random moments
    # find one (bounded: at most three times as many kills).
    while kill < KILLS or (with_sandboxes < KILLS // 2 and kill < 3 * KILLS):
        kill += 1
        run_dir = tmp_path / f"run-{kill}"
        launch = config(run_dir, mailbox_root / f"mb-{kill}", slots=3, think_s=0.05)
        work_q, report_q = ctx.Queue(), ctx.Queue()
        for group in group_by_task([Work(c, 1) for c in cases(30)]):
            work_q.put(group)
        work_q.put(None)
        worker = ctx.Process(
            target=_worker_main, args=(launch, work_q, report_q, os.getpid()), daemon=True
        )
        worker.start()
        assert worker.pid is not None
        try:
            mode, detail = _ready(report_q, READY_WITHIN_S)
            assert mode == "pid_namespace", detail
            _first_endpoint(launch.mailbox_root, worker, READY_WITHIN_S)
            time.sleep(rng.uniform(0.0, KILL_WITHIN_S))
            held = hold(worker.pid)
            try:
                assert len(held.namespaces) == 1, f"no init below the worker: {held.processes}"
                outside = outside_the_namespaces(held)
                assert outside == [], f"started outside the worker's namespace: {outside}"
                os.kill(worker.pid, signal.SIGKILL)
                worker.join(timeout=GONE_WITHIN_S)
                sandboxes = [p for p in held.processes if p.name == "bwrap"]
                with_sandboxes += bool(sandboxes)
                sandboxes_at_kills += len(sandboxes)
                left = left_after_kill(held, [run_dir])
                assert left == [], f"kill {kill}: outlived the worker: {left}"
            finally:
                held.close()
            # What ended before the kill ended as the actor decided: no start failed.
            for result in run_dir.glob("episodes/*/result.json"):
                document = json.loads(result.read_text())
                assert document["outcome"] != "error", document["errors"]
                completed += 1
        finally:
            if worker.is_alive():
                worker.kill()
                worker.join()
            for q in (work_q, report_q):
                q.cancel_join_thread()
                q.close()
    took = time.monotonic() - began
    print(
        f"\n{kill} kills in {took:.0f} s; {with_sandboxes} landed with sandboxes below the "
        f"worker ({sandboxes_at_kills} bubblewrap processes in all); {completed} episodes "
        "completed before them; survivors: 0"
    )
    # Most kills land among live sandboxes, or the test would prove little.
    assert with_sandboxes >= KILLS // 2


# --- a whole launch killed -------------------------------------------------------------

COORDINATOR = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path[:0] = {folders!r}
    from test_worker_lifetime import cases, config
    from mailroom.orchestrator.campaign.coordinator import Work, run_work
    launch = config(Path(sys.argv[1]), Path(sys.argv[2]), slots=2, think_s=0.5)
    run_work(launch, [Work(c, 1) for c in cases(40)], 2, lambda *_: None)
    """
).format(folders=[str(Path(__file__).parent), str(REPO / "tests"), str(REPO / "tests" / "support")])


def test_a_killed_launch_leaves_no_worker_or_actor(tmp_path: Path, mailbox_root: Path) -> None:
    rng = random.Random(33)
    for round_ in range(1, 4):
        run_dir, mailbox = tmp_path / f"run-{round_}", mailbox_root / f"mb-{round_}"
        coordinator = subprocess.Popen(
            [sys.executable, "-c", COORDINATOR, str(run_dir), str(mailbox)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + READY_WITHIN_S
            while len(actors_started(run_dir)) < 2:
                assert coordinator.poll() is None, "the launch ended before actors started"
                assert time.monotonic() < deadline, "no actors started"
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 1.0))
            held = hold(coordinator.pid)
            try:
                inits = [p for p in held.processes if p.name == INIT_NAME]
                workers = {p.ppid for p in inits}
                assert len(workers) == len(inits) == len(held.namespaces) == 2, held.processes
                parents = [_read(w) for w in workers]
                assert all(w is not None and w.ppid == coordinator.pid for w in parents)
                assert outside_the_namespaces(held) == []
                os.kill(coordinator.pid, signal.SIGKILL)
                coordinator.wait(timeout=GONE_WITHIN_S)
                left = left_after_kill(held, [run_dir])
                assert left == [], f"round {round_}: outlived the launch: {left}"
            finally:
                held.close()
        finally:
            if coordinator.poll() is None:
                coordinator.kill()
            coordinator.wait()
        assert coordinator.stderr is not None
        assert "not held in a pid namespace" not in coordinator.stderr.read().decode()


# --- where no namespace can be made ----------------------------------------------------


def _unprivileged_worker(conn: Any) -> None:
    """A worker that is not root (its effective uid said so): the answer, and where a
    child it starts lands."""
    with mock.patch.object(os, "geteuid", return_value=1000):  # this forked process only
        held = hold_children_in_pid_namespace()
    with start_in_namespace():
        child = subprocess.Popen(["sleep", "30"])
    try:
        conn.send((held.mode, held.detail, pid_namespaces(child.pid)[:1]))
    finally:
        child.kill()
        child.wait()


def test_a_worker_that_cannot_make_a_namespace_starts_actors_as_before() -> None:
    ctx = multiprocessing.get_context("fork")
    here, there = ctx.Pipe()
    worker = ctx.Process(target=_unprivileged_worker, args=(there,))
    worker.start()
    assert here.poll(READY_WITHIN_S), "the worker never answered"
    mode, detail, child_namespace = here.recv()
    worker.join(timeout=GONE_WITHIN_S)
    assert (mode, detail) == ("parent_death_signal", "not root: a pid namespace needs root")
    assert child_namespace == pid_namespaces(os.getpid())[:1]  # this process's own
    warning = unheld_warning(detail)
    assert "not held in a pid namespace" in warning and detail in warning


# --- the namespace's init killed -------------------------------------------------------


def test_a_worker_whose_namespace_init_is_killed_ends_itself_and_leaves_nothing(
    tmp_path: Path, mailbox_root: Path
) -> None:
    """Killing the init ends every actor of the worker and every later start: the worker
    ends itself (SIGTERM, exit 143), the coordinator records what it left, and nothing
    of it survives."""
    run_dir = tmp_path / "run"
    launch = config(run_dir, mailbox_root / "mb", slots=2, think_s=0.3)
    work = [Work(c, 1) for c in cases(20)]
    outcomes: list[WorkOutcome] = []
    before = {p.pid for p in multiprocessing.active_children()}
    coordinator = threading.Thread(
        target=lambda: outcomes.append(run_work(launch, work, 1, lambda *_: None))
    )
    coordinator.start()
    deadline = time.monotonic() + READY_WITHIN_S
    while len(actors_started(run_dir)) < 2:
        assert time.monotonic() < deadline and coordinator.is_alive(), "no actors started"
        time.sleep(0.05)
    [worker] = [p for p in multiprocessing.active_children() if p.pid not in before]
    assert worker.pid is not None
    held = hold(worker.pid)
    try:
        [init] = [p for p in held.processes if p.name == INIT_NAME]
        os.kill(init.pid, signal.SIGKILL)
        coordinator.join(timeout=300)
        assert not coordinator.is_alive(), "the worker did not end"
        assert worker.exitcode == 128 + signal.SIGTERM
        assert left_after_kill(held, [run_dir]) == []
    finally:
        held.close()
    results = list(run_dir.glob("episodes/*/result.json"))
    assert len(results) < len(work)  # the rest is left for `resume`
