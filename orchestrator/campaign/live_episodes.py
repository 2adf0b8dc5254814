"""One worker process, up to S live episodes at once, served as their responses arrive.

Each live episode is a generator (`episode.blinded.blinded_episode`) with its own
simulator, endpoint, sandboxed actor and evidence; it runs until it waits for a
decision. The worker's main thread serves every live episode (claim, simulator steps
and renders, publication) and waits on one `InboxHub` for every inbox, with no thread
or loop of its own per episode. Responses are served first come first served, by when
they arrived; a response that waited because the worker was busy with another episode
records that wait as its queueing delay.

Starting an episode takes seconds (a simulator's build, its reset and settling, the
actor's start), too long to keep every other live episode waiting: one starter thread
runs each start up to its first observation, one at a time, while the main thread goes
on serving. A simulator is used by one thread at a time, and gives up its renderer's
context (`Simulator.detach`) when it passes from one to the other. Ending one takes
seconds too (an actor still thinking is stopped, videos are written): once the
episode no longer needs its simulator (`runner.Ending`), the simulator goes back to the
pool and a finisher thread of its own does the rest, result last.

Simulators are kept per task: an idle simulator of the next case's task is reused; a
new one is built only while `Admission` says memory allows, or else an idle one of
another task is rebuilt for it. An episode that fails outside the runner's typed
handling ends alone (reported `crashed`, its simulator discarded); the others go on.
"""

from __future__ import annotations

import contextlib
import functools
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mailroom.mailbox.inbox_hub import InboxHub
from mailroom.measures import peak_rss_mb, rss_mb
from mailroom.orchestrator.campaign.capacity.actor_memory import ActorShare, ActorsNow
from mailroom.orchestrator.campaign.capacity.memory import (
    Admission,
    MemoryUnknownError,
    machine_memory,
)
from mailroom.orchestrator.campaign.capacity.service_load import ServiceLoad
from mailroom.orchestrator.episode.blinded import blinded_episode
from mailroom.orchestrator.episode.evidence import EventMirror
from mailroom.orchestrator.episode.runner import Awaiting, Ending, EpisodeSteps
from mailroom.orchestrator.families.registry import reference_horizon
from mailroom.orchestrator.records.result import EpisodeResult
from mailroom.orchestrator.sim.base import Simulator, SimulatorFactory
from mailroom.orchestrator.sim.parked import ParkedEpisode, TaskHost
from mailroom.orchestrator.transport.base import PollableTransport, TimedOut

TaskKey = tuple[str, int, int]
# The longest the worker sleeps with episodes live (a new look at the clock and memory).
MAX_SLEEP_S = 0.5
STARTER_JOIN_S = 30.0
# How often admission reads the live actors' memory cgroups (two small files each).
ACTORS_READ_S = 0.25
# An episode's clean-up stops its actor within seconds (grace, then SIGKILL).
FINISHER_JOIN_S = 60.0


def task_key(case: Any) -> TaskKey:
    return (case.suite, case.task_index, case.task_order_index)


@dataclass
class SimulatorPool:
    """A worker's simulators: idle ones by task, each task's host when episodes are
    parked, and how many simulators exist."""

    open_simulator: SimulatorFactory
    proprio: bool
    parking: bool = False
    idle: dict[TaskKey, list[Simulator]] = field(default_factory=dict)
    hosts: dict[TaskKey, TaskHost] = field(default_factory=dict)
    count: int = 0

    def host(self, task: TaskKey, control_cap: int) -> TaskHost:
        """The task's host, made on first use (it builds its simulators when its
        episodes start)."""
        host = self.hosts.get(task)
        if host is None:
            host = TaskHost(functools.partial(self.build, control_cap), self.discard)
            self.hosts[task] = host
        return host

    def close_empty_hosts(self, unless: set[TaskKey] | frozenset[TaskKey] = frozenset()) -> int:
        """Close the simulators of hosts with no episode left (but those of `unless`)."""
        closed = 0
        for task, host in list(self.hosts.items()):
            if task not in unless and not host.episodes:
                closed += host.close_idle()
                del self.hosts[task]
        return closed

    def take_idle(self, task: TaskKey) -> Simulator | None:
        kept = self.idle.get(task)
        return kept.pop() if kept else None

    def take_any_idle(
        self, unless: set[TaskKey] | frozenset[TaskKey] = frozenset()
    ) -> Simulator | None:
        """An idle simulator of any task but those in `unless`."""
        for task, kept in self.idle.items():
            if kept and task not in unless:
                return kept.pop()
        return None

    def build(self, control_cap: int) -> Simulator:
        simulator = self.open_simulator(control_cap=control_cap, proprio=self.proprio)
        self.count += 1
        return simulator

    def give_back(self, task: TaskKey, simulator: Simulator) -> None:
        self.idle.setdefault(task, []).append(simulator)

    def discard(self, simulator: Simulator) -> None:
        self.count -= 1
        # A simulator that broke may not close cleanly: it is gone anyway.
        with contextlib.suppress(Exception):
            simulator.close()

    def close(self) -> None:
        for kept in self.idle.values():
            while kept:
                self.discard(kept.pop())
        self.close_empty_hosts()


@dataclass
class _Started:
    """What an episode's start returned on the starter thread: its first wait, its
    result (it ended at once), or the error that ended it; and, when it built a new
    simulator, the simulators before and the resident memory before and after."""

    episode: LiveEpisode
    yielded: Awaiting | Ending | None = None
    result: EpisodeResult | None = None
    error: Exception | None = None
    built: tuple[int, float, float] | None = None


@dataclass
class LiveEpisode:
    item: Any  # coordinator.Work
    steps: EpisodeSteps
    simulator: Simulator
    task: TaskKey
    waiting: Awaiting | None = None
    deadline: float = 0.0
    next_look: float = 0.0

    @property
    def transport(self) -> PollableTransport:
        assert self.waiting is not None
        transport = self.waiting.transport
        if not isinstance(transport, PollableTransport):
            raise TypeError("a live episode's transport must answer without waiting")
        return transport


Report = Callable[[tuple[Any, ...]], None]
# Hands out the next group of work items: [] when there is none now (only without
# blocking), None when there will never be more.
NextWork = Callable[[bool], "list[Any] | None"]


class LiveEpisodes:
    """The worker's loop over its live episodes (see the module docstring)."""

    def __init__(
        self,
        config: Any,  # coordinator.LaunchConfig
        open_simulator: SimulatorFactory,
        report: Report,
        admission: Admission,
        mirror: EventMirror | None = None,
    ) -> None:
        if config.kept is not None:
            config.kept.pin()  # the run's kept catalog, handed over inside the work
        self.config = config
        self.mirror = mirror
        self.settings = config.settings
        self.slots = max(1, int(config.slots))
        self.report = report
        self.admission = admission
        self.actor_share = ActorShare.declared_in(config.limits)
        self._actors_read: tuple[float, ActorsNow] | None = None
        # One live episode at a time has nothing to park beside: it keeps its simulator.
        parking = config.holding == "parked" and self.slots > 1
        self.pool = SimulatorPool(open_simulator, config.settings.proprio, parking=parking)
        self.hub = InboxHub()
        self.load = ServiceLoad()
        self.live: list[LiveEpisode] = []
        self.pending: deque[Any] = deque()
        self.exhausted = False
        # The episode whose start runs on the starter thread, and what starts returned.
        self.starting: LiveEpisode | None = None
        self._to_start: queue.SimpleQueue[tuple[LiveEpisode, int | None] | None] = (
            queue.SimpleQueue()
        )
        self._finishers: list[threading.Thread] = []
        self._started: queue.SimpleQueue[_Started] = queue.SimpleQueue()
        self._starter = threading.Thread(target=self._start_loop, name="starter", daemon=True)

    # --- the loop ---------------------------------------------------------------

    def run(self, next_work: NextWork) -> None:
        self._starter.start()
        try:
            while True:
                self._collect_started()
                self._serve()
                self._admit(next_work)
                if self.exhausted and not self.pending:
                    self.pool.close()  # idle simulators serve no more work: free them
                if not self.live:
                    if self.exhausted and not self.pending:
                        self._join_finishers()
                        return
                    if not self.pending:
                        self._take(next_work, block=True)
                    continue
                now = time.monotonic()
                waits = [min(e.next_look, e.deadline) for e in self.live if e.waiting]
                wake_at = min(waits, default=now + MAX_SLEEP_S)
                self.hub.wait(min(MAX_SLEEP_S, max(0.0, wake_at - now)))
        finally:
            self._stop_starter()
            self._abandon_all()
            self._join_finishers()
            self.pool.close()
            self.hub.close()

    def _take(self, next_work: NextWork, *, block: bool) -> None:
        if self.exhausted:
            return
        group = next_work(block)
        if group is None:
            self.exhausted = True
        else:
            self.pending.extend(group)

    # --- serving ----------------------------------------------------------------

    def _serve(self) -> None:
        """Look at every inbox something arrived in, earliest arrival first, then at
        those whose look or deadline is due."""
        now = time.monotonic()
        candidates: list[tuple[float, bool, LiveEpisode]] = []
        for episode in self.live:
            if episode.waiting is None:
                continue
            since = episode.transport.unseen_since()
            if since is not None:
                candidates.append((since, True, episode))
            elif now >= episode.next_look or now >= episode.deadline:
                candidates.append((episode.next_look, False, episode))
        candidates.sort(key=lambda c: c[0])
        for at, arrived, episode in candidates:
            started = time.monotonic()
            self._look(episode)
            self.load.served(started, time.monotonic(), at if arrived else None)

    def _look(self, episode: LiveEpisode) -> None:
        waiting = episode.waiting
        assert waiting is not None
        transport = episode.transport
        try:
            # Judged by when a response arrived, not by when the worker looks: one that
            # arrived after the deadline answers nothing (a timeout, however busy the
            # worker was) and stays in the inbox, swept as late when the episode closes.
            outcome = transport.poll_decision(waiting.delivery, waiting.limits, episode.deadline)
        except Exception as exc:  # raised inside the episode, where the runner types it
            self._step(episode, functools.partial(episode.steps.throw, exc))
            return
        now = time.monotonic()
        if outcome is None:
            if now < episode.deadline:
                episode.next_look = now + transport.recheck_interval
                return
            outcome = TimedOut(waited_s=waiting.timeout_s)
        decided = outcome
        self._step(episode, lambda: episode.steps.send(decided))

    def _step(self, episode: LiveEpisode, step: Callable[[], Awaiting | Ending]) -> None:
        """Run the episode on to its next wait (or its end); a failure is its own."""
        try:
            yielded = step()
        except StopIteration as finished:  # ended without an Ending: cleaned up already
            self._ended(episode, finished.value)
        except Exception as exc:  # outside the runner's typed handling: this one alone
            self._crash(episode, exc)
        else:
            self._after(episode, yielded)

    def _after(self, episode: LiveEpisode, yielded: Awaiting | Ending) -> None:
        if isinstance(yielded, Ending):
            self._hand_to_finisher(episode, yielded)
        else:
            self._wait(episode, yielded)

    def _wait(self, episode: LiveEpisode, waiting: Awaiting) -> None:
        now = time.monotonic()
        episode.waiting = waiting
        # From the publication, not from now: a first observation, published on the
        # starter thread, may be taken up here only after other episodes were served.
        episode.deadline = waiting.published_at + waiting.timeout_s
        episode.next_look = now + episode.transport.recheck_interval

    # --- starting and ending ------------------------------------------------------

    def _admit(self, next_work: NextWork) -> None:
        """Hand the next case to the starter thread, if it is free and a slot is."""
        if self.starting is not None or len(self.live) >= self.slots:
            return
        # Admission by CPU: another live episode only while the serving thread keeps up.
        if self.live and not self.load.keeps_up(time.monotonic()):
            return
        if not self.pending:
            self._take(next_work, block=False)
            if not self.pending:
                return
        item = self.pending[0]
        simulator = self._simulator_for(item)
        if simulator is None:
            return  # memory is short: wait for a live episode to end
        self.pending.popleft()
        self._start(item, simulator)

    def _simulator_for(self, item: Any) -> tuple[Simulator, bool] | None:
        task = task_key(item.case)
        if self.pool.parking:
            return self._parked_for(task, item)
        reused = self.pool.take_idle(task)
        if reused is not None:
            return reused, False
        # An idle simulator whose task has no work left here is rebuilt for this one: a
        # build either way, without holding more memory.
        waiting = {task_key(w.case) for w in self.pending}
        spare = self.pool.take_any_idle(unless=waiting)
        if spare is not None:
            return spare, False
        if self._memory_allows():
            return self.pool.build(self._control_cap(item)), True
        other = self.pool.take_any_idle()  # rebuilt for this task: no memory added
        if other is not None:
            return other, False
        if not self.live:  # nothing live can free memory: one episode always runs
            return self.pool.build(self._control_cap(item)), True
        return None

    def _parked_for(self, task: TaskKey, item: Any) -> tuple[Simulator, bool] | None:
        """A parked episode of the task's host; when its start must build a simulator,
        only if memory allows (hosts of tasks with no work here are closed first)."""
        host = self.pool.host(task, self._control_cap(item))
        if not host.needs_build:
            # No simulator to build, but its actor takes memory too: the margin holds.
            if self.live and not self._margin_kept():
                return None
            return host.episode(), False
        if not self._memory_allows():
            waiting = {task_key(w.case) for w in self.pending} | {task}
            self.pool.close_empty_hosts(unless=waiting)
            if not self._memory_allows() and self.live:
                return None  # memory is short: wait for a live episode to end
        return host.episode(), True

    def _actors_now(self) -> ActorsNow:
        """The live actors' memory, read at most every `ACTORS_READ_S` seconds."""
        now = time.monotonic()
        if self._actors_read is None or now - self._actors_read[0] >= ACTORS_READ_S:
            self._actors_read = (now, self.actor_share.now())
        return self._actors_read[1]

    def _margin_kept(self) -> bool:
        """Whether another live actor fits, with what the live ones are expected to take."""
        try:
            memory = machine_memory()
        except MemoryUnknownError:
            return False
        return self.admission.admits_actor(rss_mb(), memory, self._actors_now())

    def _memory_allows(self) -> bool:
        try:
            memory = machine_memory()
        except MemoryUnknownError:
            return False  # nothing to go by: no more than what is live already
        return self.admission.admits_new_simulator(
            self.pool.count, rss_mb(), memory, self._actors_now()
        )

    def _control_cap(self, item: Any) -> int:
        cap: int = self.settings.control_cap(reference_horizon(item.case.suite).controls)
        return cap

    def _start(self, item: Any, chosen: tuple[Simulator, bool]) -> None:
        simulator, built = chosen
        config = self.config
        self.report(("started", item.case.case_id, item.attempt))
        simulator.set_control_cap(self._control_cap(item))
        # Its renderer may be current on this thread: the starter's from now on.
        with contextlib.suppress(Exception):
            simulator.detach()
        steps = blinded_episode(
            item.case,
            attempt=item.attempt,
            settings=self.settings,
            adapter=simulator,
            run_dir=config.run_dir,
            mailbox_root=config.mailbox_root,
            launch_actor=config.launcher,
            record=config.record,
            limits=config.limits,
            on_launch_message=functools.partial(self._forward_launch, item),
            hub=self.hub,
            mirror=self.mirror,
            instructions=config.instructions,
        )
        episode = LiveEpisode(item, steps, simulator, task_key(item.case))
        self.live.append(episode)
        self._actors_read = None  # its actor's cgroup is read anew before another start
        self.starting = episode
        # The simulators before a build: a parked episode's start builds on the starter
        # thread, a dedicated one's was built already.
        before = self.pool.count - (0 if isinstance(simulator, ParkedEpisode) else 1)
        self._to_start.put((episode, before if built else None))

    def _start_loop(self) -> None:
        """The starter thread: each episode up to its first wait, one at a time."""
        while True:
            job = self._to_start.get()
            if job is None:
                return
            episode, simulators_before = job
            before = rss_mb()
            started: _Started
            try:
                started = _Started(episode, yielded=next(episode.steps))
            except StopIteration as finished:
                started = _Started(episode, result=finished.value)
            except Exception as exc:
                started = _Started(episode, error=exc)
            with contextlib.suppress(Exception):
                episode.simulator.detach()  # the main thread renders from here on
            if simulators_before is not None:
                # Approximate: the main thread goes on meanwhile (the margin covers it).
                started.built = (simulators_before, before, rss_mb())
            self._started.put(started)
            self.hub.wake()

    def _collect_started(self) -> None:
        while True:
            try:
                started = self._started.get_nowait()
            except queue.Empty:
                return
            self.starting = None
            episode = started.episode
            if started.built is not None:
                simulators_before, before, after = started.built
                self.admission.record(simulators_before, after - before)
                item = episode.item
                self.report(
                    (
                        "simulator_built",
                        item.case.case_id,
                        item.attempt,
                        after - before,
                        simulators_before,
                        after,
                    )
                )
            if started.yielded is not None:
                self._after(episode, started.yielded)
            elif started.result is not None:
                self._ended(episode, started.result)
            else:
                assert started.error is not None
                self._crash(episode, started.error)

    def _stop_starter(self) -> None:
        """Let a start in progress end (seconds at most) before the episodes unwind."""
        self._to_start.put(None)
        if self._starter.is_alive():
            self._starter.join(timeout=STARTER_JOIN_S)
        self._collect_started()

    def _forward_launch(self, item: Any, text: str) -> None:
        self.report(("launch_message", item.case.case_id, item.attempt, text))

    def _release(self, episode: LiveEpisode, result: EpisodeResult | None) -> None:
        """The episode leaves its slot; its simulator goes back to the pool, or is
        closed if its state is unknown (it raised)."""
        self.live.remove(episode)
        broken = result is None or any(e.code == "simulator_exception" for e in result.errors)
        if isinstance(episode.simulator, ParkedEpisode):
            episode.simulator.end(broken=broken)
            if not self.pending and self.exhausted:
                self.pool.close_empty_hosts()
        elif broken:
            self.pool.discard(episode.simulator)
        else:
            self.pool.give_back(episode.task, episode.simulator)

    def _hand_to_finisher(self, episode: LiveEpisode, ending: Ending) -> None:
        self._release(episode, ending.result)
        finisher = threading.Thread(
            target=self._finish_off, args=(episode,), name="finisher", daemon=True
        )
        self._finishers = [t for t in self._finishers if t.is_alive()]
        self._finishers.append(finisher)
        finisher.start()

    def _finish_off(self, episode: LiveEpisode) -> None:
        """A finisher thread: the episode's clean-up, then its report."""
        item = episode.item
        try:
            episode.steps.send(None)
        except StopIteration as finished:
            result: EpisodeResult = finished.value
            self.report(
                ("finished", item.case.case_id, item.attempt, result.outcome, peak_rss_mb())
            )
        except Exception as exc:
            self.report(("crashed", item.case.case_id, item.attempt, repr(exc)[:500]))
        else:
            self.report(("crashed", item.case.case_id, item.attempt, "went on after its end"))
        self.hub.wake()

    def _ended(self, episode: LiveEpisode, result: EpisodeResult) -> None:
        """An episode that ended without an `Ending` (it cleaned up on this thread)."""
        self._release(episode, result)
        item = episode.item
        self.report(("finished", item.case.case_id, item.attempt, result.outcome, peak_rss_mb()))

    def _crash(self, episode: LiveEpisode, exc: Exception) -> None:
        self._release(episode, None)
        item = episode.item
        self.report(("crashed", item.case.case_id, item.attempt, repr(exc)[:500]))

    def _join_finishers(self) -> None:
        deadline = time.monotonic() + FINISHER_JOIN_S
        for finisher in self._finishers:
            finisher.join(timeout=max(0.0, deadline - time.monotonic()))

    def _abandon_all(self) -> None:
        """The worker is ending (a signal): each live episode unwinds its own clean-up
        (actor stopped, closed notice, evidence closed), all at once, and writes no
        result. A start still running on the starter thread is left to the process's
        end."""
        abandoned = [e for e in self.live if e is not self.starting]
        closers = [
            threading.Thread(target=_close_quietly, args=(e.steps,), daemon=True) for e in abandoned
        ]
        for closer in closers:
            closer.start()
        deadline = time.monotonic() + FINISHER_JOIN_S
        for closer in closers:
            closer.join(timeout=max(0.0, deadline - time.monotonic()))
        for episode in abandoned:
            self._release(episode, None)


def _close_quietly(steps: EpisodeSteps) -> None:
    with contextlib.suppress(Exception):
        steps.close()
