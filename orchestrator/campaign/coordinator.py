"""Decides what a launch or resume runs now, and runs it in worker processes on this machine.

An attempt whose observations an actor may have seen is never re-run silently: `schedule`
records it as interrupted. Each worker process hosts up to `slots` live episodes
(`campaign/live_episodes.py`), builds its simulators lazily (EGL contexts do not survive a fork)
and reuses them across the episodes of a task. The parent never imports the simulator;
it hands out work by task, collects results and records the attempts a lost worker
leaves without one. `Executor` is where work runs: `LocalExecutor` here, the Ray
executor in `cluster/`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing as mp
import os
import queue
import signal
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Protocol

from mailroom.orchestrator.actors.launcher import ProcessLauncher
from mailroom.orchestrator.actors.lifetime import die_with_parent, hold_children_in_pid_namespace
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.actors.profiles import DEFAULT_INSTRUCTIONS
from mailroom.orchestrator.campaign.capacity.kernel_limits import raise_open_files
from mailroom.orchestrator.campaign.capacity.memory import Admission, MemoryPolicy
from mailroom.orchestrator.campaign.interrupted import record_interrupted
from mailroom.orchestrator.campaign.stopping import StopRequest
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.episode.settings import RecordMode, RunSettings
from mailroom.orchestrator.families.kept import KeptCatalog
from mailroom.orchestrator.records.disclosures import disclosed_attempts
from mailroom.orchestrator.records.layout import attempt_id_of
from mailroom.orchestrator.records.result import EpisodeResult
from mailroom.orchestrator.records.run_directory import AttemptRecord, CorruptResult, RunDirectory
from mailroom.orchestrator.sim.base import SimulatorFactory
from mailroom.orchestrator.sim.parked import Holding

WORK_POLL_S = 0.5
# A stopped launch's workers unwind their live episodes (each actor stopped) within this,
# or are killed: their pid namespace ends whatever they started.
STOP_WAIT_S = 30.0


@dataclass(frozen=True)
class LaunchConfig:
    run_dir: Path
    mailbox_root: Path
    settings: RunSettings
    record: RecordMode
    # Built and checked in the launching process (refusals happen before any worker
    # starts); None: external actors, handed launch messages.
    launcher: ProcessLauncher | None
    limits: ActorLimits = field(default_factory=ActorLimits)
    # Builds each worker's simulators; None: LIBERO (imported in the worker alone).
    simulator: SimulatorFactory | None = None
    # Live episodes per worker, and what memory their admission keeps free.
    slots: int = 1
    # How a worker holds its episodes' simulators: "parked" (one serving simulator and
    # one starter per task, the waiting episodes parked as values: `sim.parked`) or
    # "dedicated" (a simulator per live episode).
    holding: Holding = "parked"
    memory: MemoryPolicy = field(default_factory=MemoryPolicy)
    workers: int = 1
    # The version of the actor instructions the profile hands its actors.
    instructions: str = DEFAULT_INSTRUCTIONS
    # The catalog the run keeps (a LIBERO-Para copy's), as data: each worker pins it
    # before it resolves a case, on whatever node it runs (families/kept.py).
    kept: KeptCatalog | None = None
    # The agent CLI packages' versions the run's manifest recorded (`npm:NAME`), when its
    # actors run them: a Ray worker checks that its node's installation holds these.
    agent_cli_versions: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Work:
    case: Case
    attempt: int


@dataclass(frozen=True)
class Schedule:
    work: list[Work]
    already_done: list[AttemptRecord]
    interrupted: list[AttemptRecord]
    restarted: list[AttemptRecord]


def schedule(cases: Sequence[Case], run: RunDirectory, *, rerun_errored: bool = False) -> Schedule:
    """What to run now. Completed cases are skipped; an attempt whose observations an
    actor may have seen is never silently re-run: it is recorded as interrupted."""
    by_case: dict[str, list[AttemptRecord]] = defaultdict(list)
    for record in run.attempts():
        by_case[record.case_id].append(record)
    disclosed = disclosed_attempts(run)
    work: list[Work] = []
    done: list[AttemptRecord] = []
    interrupted: list[AttemptRecord] = []
    restarted: list[AttemptRecord] = []
    for case in cases:
        attempts = by_case.get(case.case_id, [])
        if not attempts:
            work.append(Work(case, 1))
            continue
        latest = attempts[-1]
        if isinstance(latest.result, EpisodeResult):
            retry = (
                rerun_errored
                and latest.result.outcome == "error"
                and latest.attempt_id not in disclosed
            )
            if retry:
                work.append(Work(case, latest.attempt + 1))
            else:
                done.append(latest)
            continue
        if latest.actor_saw_anything() or isinstance(latest.result, CorruptResult):
            interrupted.append(latest)
            if rerun_errored and latest.attempt_id not in disclosed:
                work.append(Work(case, latest.attempt + 1))
        else:
            restarted.append(latest)
            work.append(Work(case, latest.attempt + 1))
    return Schedule(work, done, interrupted, restarted)


def group_by_task(work: Sequence[Work], at_least: int = 1) -> list[list[Work]]:
    """Consecutive episodes of one task share a simulator; groups keep plan order.

    With fewer tasks than `at_least` (the workers), a task's episodes are cut into
    consecutive parts, more parts for larger tasks, until every worker has a group (or
    every group is one episode).
    """
    by_task: dict[tuple[str, int, int], list[Work]] = {}
    for item in work:
        key = (item.case.suite, item.case.task_index, item.case.task_order_index)
        by_task.setdefault(key, []).append(item)
    groups = list(by_task.values())
    parts = [1] * len(groups)
    while sum(parts) < at_least:
        splittable = [i for i, g in enumerate(groups) if parts[i] < len(g)]
        if not splittable:
            break
        largest = max(splittable, key=lambda i: len(groups[i]) / parts[i])
        parts[largest] += 1
    out: list[list[Work]] = []
    for group, n in zip(groups, parts, strict=True):
        size, extra = divmod(len(group), n)
        start = 0
        for i in range(n):
            end = start + size + (1 if i < extra else 0)
            out.append(group[start:end])
            start = end
    return out


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds: the actor is stopped, the env closed


def _leave_sigint_to_the_launch(signum: int, frame: object) -> None:
    """A Ctrl-C reaches the terminal's whole process group: the launch hears it and ends
    its workers itself (SIGTERM). A handler, not SIG_IGN: an ignored signal would stay
    ignored in the actors a worker starts."""


def _next_group(work_q: Any, block: bool) -> list[Work] | None:
    """The next task's work for this worker: [] if none is queued now, None at the end."""
    try:
        group: list[Work] | None = work_q.get() if block else work_q.get_nowait()
    except queue.Empty:
        return []
    return group


def _worker_main(config: LaunchConfig, work_q: Any, report_q: Any, parent_pid: int) -> None:
    signal.signal(signal.SIGINT, _leave_sigint_to_the_launch)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # blocked by `_start`
    die_with_parent(parent_pid)
    # Before any other thread or child: the actors this worker starts go into a pid
    # namespace whose init exits with it, so none outlives it (`actors/lifetime.py`).
    held = hold_children_in_pid_namespace()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    report_q.put(("actor_lifetime", "", 0, held.mode, held.detail))
    # Each live episode holds about a dozen descriptors (`capacity/kernel.py`): the soft
    # limit goes up to the hard one, and the worker says what it was.
    opened = raise_open_files()
    report_q.put(("open_files_raised", "", 0, opened.soft_before, opened.soft, opened.hard))
    from mailroom.orchestrator.campaign.live_episodes import LiveEpisodes

    open_simulator = config.simulator
    if open_simulator is None:
        from mailroom.orchestrator.families.registry import simulator_factory

        open_simulator = simulator_factory()
    episodes = LiveEpisodes(
        config,
        open_simulator,
        report_q.put,
        Admission(config.memory, workers=config.workers),
    )
    episodes.run(lambda block: _next_group(work_q, block))


Listener = Callable[[str, tuple[Any, ...]], None]


def unheld_warning(detail: str) -> str:
    """What a launch says when its workers cannot hold their actors in a pid namespace."""
    return (
        f"warning: actors are not held in a pid namespace of their worker ({detail}); "
        "they die with it by their parent-death signal alone, so an actor whose sandbox "
        "is being set up when its worker is killed can outlive it (docs/confinement.md)"
    )


@dataclass(frozen=True)
class WorkOutcome:
    """Attempts that ended without a result, and those whose errored result could not be
    written either (the run directory failed: full, read-only)."""

    lost: list[tuple[str, int, str]]
    unrecorded: list[tuple[str, str]]


@dataclass
class _Reports:
    """What a launch's workers have reported so far."""

    config: LaunchConfig
    listener: Listener
    remaining: int
    in_flight: set[tuple[str, int]] = field(default_factory=set)
    lost: list[tuple[str, int, str]] = field(default_factory=list)
    warned: bool = False

    def hear(self, message: tuple[Any, ...]) -> None:
        kind, case_id, attempt, *rest = message
        unheld = kind == "actor_lifetime" and rest[0] != "pid_namespace"
        if unheld and self.config.launcher is not None and not self.warned:
            self.warned = True  # once a launch (each worker says the same)
            print(unheld_warning(str(rest[1])), file=sys.stderr, flush=True)
        self.listener(kind, (case_id, attempt, *rest))
        if kind == "started":
            self.in_flight.add((case_id, attempt))
        elif kind in ("finished", "crashed"):
            self.in_flight.discard((case_id, attempt))
            self.remaining -= 1
            if kind == "crashed":
                self.lost.append((case_id, attempt, str(rest[0])))


def _start(procs: Sequence[BaseProcess]) -> None:
    """Each worker starts with SIGINT blocked, until `_worker_main` has its handler: a
    Ctrl-C at the terminal also reaches the workers, and must not end one on its way up.
    The launch still hears it (another of its threads takes it, or it waits here)."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        for proc in procs:
            proc.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _end_stopped_workers(procs: Sequence[BaseProcess], report_q: Any, reports: _Reports) -> None:
    """A stop: each worker ends (SIGTERM: its live episodes unwind, their actors stopped,
    no result written) and what it reports meanwhile is heard (a result its finisher was
    writing is written whole); one that outlasts `STOP_WAIT_S` is killed."""
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + STOP_WAIT_S
    while any(p.is_alive() for p in procs) and time.monotonic() < deadline:
        with contextlib.suppress(queue.Empty):
            reports.hear(report_q.get(timeout=0.1))
    for proc in procs:
        if proc.is_alive():
            proc.kill()
        proc.join()
    while True:  # what each put before it ended
        try:
            reports.hear(report_q.get_nowait())
        except queue.Empty:
            return


def run_work(
    config: LaunchConfig,
    work: Sequence[Work],
    workers: int,
    listener: Listener,
    stop: StopRequest | None = None,
) -> WorkOutcome:
    """Run `work` in `workers` processes and record every attempt that died without one.

    Once `stop` is requested nothing more starts: the workers end, and the attempts
    they had live are left without a result, for a resume to record or re-run."""
    stop = stop or StopRequest()
    run = RunDirectory(config.run_dir)
    if stop.requested:
        return WorkOutcome(lost=[], unrecorded=[])
    ctx = mp.get_context("spawn")
    work_q = ctx.Queue()
    report_q = ctx.Queue()
    groups = group_by_task(work, at_least=workers)
    for group in groups:
        work_q.put(group)
    n = max(1, min(workers, len(groups)))
    for _ in range(n):
        work_q.put(None)
    config = dataclasses.replace(config, workers=n)  # each worker's share of a memory cap
    procs: list[BaseProcess] = [
        ctx.Process(target=_worker_main, args=(config, work_q, report_q, os.getpid()), daemon=False)
        for _ in range(n)
    ]
    _start(procs)
    reports = _Reports(config, listener, remaining=len(work))
    try:
        while reports.remaining > 0 and not stop.requested:
            try:
                message = report_q.get(timeout=WORK_POLL_S)
            except queue.Empty:
                if not any(p.is_alive() for p in procs):
                    break
                continue
            reports.hear(message)
        if stop.requested:
            listener("stopping", (stop.name(),))
            work_q.cancel_join_thread()  # the groups no worker took are dropped
            _end_stopped_workers(procs, report_q, reports)
    finally:
        for proc in procs:
            proc.join(timeout=5 if reports.remaining == 0 else 0.1)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=10)
    lost = reports.lost
    if not stop.requested:
        for case_id, attempt in sorted(reports.in_flight):
            lost.append((case_id, attempt, "worker process ended during the episode"))
    return record_lost(run, lost)


def record_lost(run: RunDirectory, lost: list[tuple[str, int, str]]) -> WorkOutcome:
    """Record each attempt that ended without a result as interrupted (`worker_lost`),
    from the events its run directory holds."""
    unrecorded: list[tuple[str, str]] = []
    for case_id, attempt, reason in lost:
        try:
            record_interrupted(
                run, attempt_id_of(case_id, attempt), reason=reason, kind="worker_lost"
            )
        except OSError as exc:  # the run directory itself failed: say so, write nothing half
            unrecorded.append(
                (attempt_id_of(case_id, attempt), f"{reason}; recording it failed: {exc}")
            )
    return WorkOutcome(lost=lost, unrecorded=unrecorded)


class Executor(Protocol):
    """Where a launch's work runs: worker processes on this machine, or a cluster."""

    def describe(self) -> dict[str, Any]:
        """What the run's `launched`/`resumed` event records of it."""

    def run(
        self,
        config: LaunchConfig,
        work: Sequence[Work],
        workers: int,
        listener: Listener,
        stop: StopRequest | None = None,
    ) -> WorkOutcome:
        """Run `work` and record every attempt that ended without a result; once `stop`
        is requested, start nothing more and leave the live attempts without one."""


@dataclass(frozen=True)
class LocalExecutor:
    """Worker processes on this machine (the default)."""

    def describe(self) -> dict[str, Any]:
        return {"executor": "local"}

    def run(
        self,
        config: LaunchConfig,
        work: Sequence[Work],
        workers: int,
        listener: Listener,
        stop: StopRequest | None = None,
    ) -> WorkOutcome:
        return run_work(config, work, workers, listener, stop)
