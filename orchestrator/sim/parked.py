"""Many live episodes of one task on two simulators: the rest wait as parked values.

A `TaskHost` holds, for one task in one worker, a *serving* simulator on which every
decision's chunk of every episode runs, and a *starter* on which new episodes are
reset and settled (a start takes about a second: it never holds the serving one). Each
episode is a `ParkedEpisode`, a `Simulator` to the runner: an actor cannot tell.

- A start runs on the starter, then takes the episode out as values (`Parkable.park`,
  checked whole). The host's first episode makes its starter the serving simulator.
- A step puts its episode back into the serving simulator if another one ran there
  last (parking that one first), and runs the control.
- An episode that cannot be parked (its model differs where parking does not reach, or
  its compiled scene is not the serving one's) keeps the starter as a dedicated
  simulator of its own; so does every episode of a simulator that is not `Parkable`.
  `ParkedEpisode.holding` says which: `parked` or `dedicated`.

Starts run on one thread and steps on another (`campaign.live_episodes`): the host's lock
makes each hand-over atomic, and each simulator is used by one thread at a time (the
starter by starts, the serving one by steps), except at the first start's hand-over.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence

from mailroom.orchestrator.records.result import SimulatorHolding
from mailroom.orchestrator.sim.base import (
    ControlOutcome,
    EpisodeStart,
    NotParkableError,
    Parkable,
    Simulator,
    SimulatorError,
    TaskIdentity,
)

Holding = SimulatorHolding
# Builds one more simulator for the host (its memory admitted by the caller), and
# closes one the host no longer needs.
OpenSimulator = Callable[[], Simulator]
CloseSimulator = Callable[[Simulator], None]


class TaskHost:
    """One task's serving simulator and starter in a worker, and its episodes."""

    def __init__(
        self, open_simulator: OpenSimulator, close_simulator: CloseSimulator | None = None
    ) -> None:
        self._open = open_simulator
        self._close = close_simulator or _close_quietly
        self._lock = threading.Lock()
        self.serving: Simulator | None = None
        self.starter: Simulator | None = None
        self.tenant: ParkedEpisode | None = None
        self.episodes: set[ParkedEpisode] = set()
        self.built = 0

    @property
    def simulators(self) -> int:
        return (self.serving is not None) + (self.starter is not None)

    @property
    def needs_build(self) -> bool:
        """Whether the next start builds a simulator (memory to admit first)."""
        return self.starter is None

    def episode(self) -> ParkedEpisode:
        view = ParkedEpisode(self)
        with self._lock:
            self.episodes.add(view)
        return view

    def _take_starter(self) -> Simulator:
        with self._lock:
            starter, self.starter = self.starter, None
        if starter is None:
            starter = self._open()
            self.built += 1
        return starter

    def _settle(self, view: ParkedEpisode, starter: Simulator) -> None:
        """After a start on `starter`: park the episode on the host, or give it the
        starter as its own simulator."""
        parked: object | None = None
        if isinstance(starter, Parkable):
            try:
                parked = starter.park(verify=True)
            except NotParkableError:
                parked = None
        with self._lock:
            if parked is not None and self.serving is None:
                self.serving, self.tenant = starter, view  # it runs here already
                view.holding = "parked"
                return
            serving = self.serving
            if parked is not None and isinstance(serving, Parkable):
                assert isinstance(starter, Parkable)
                if serving.scene_key == starter.scene_key:
                    view.parked, view.holding = parked, "parked"
                    self.starter = starter
                    return
        view.own, view.holding = starter, "dedicated"

    def _run(
        self, view: ParkedEpisode, step: Callable[[Simulator], ControlOutcome]
    ) -> ControlOutcome:
        with self._lock:
            serving = self.serving
            if serving is None:
                raise SimulatorError("the task's serving simulator is gone")
            if self.tenant is not view:
                assert isinstance(serving, Parkable) and view.parked is not None
                if self.tenant is not None:
                    self.tenant.parked = serving.park()
                    self.tenant = None
                # If this raises, no episode is left in the serving simulator: the next
                # one put back replaces all of what this one may have half written.
                serving.unpark(view.parked)
                view.parked, self.tenant = None, view
            return step(serving)

    def leave(self, view: ParkedEpisode, *, broken: bool, own: Simulator | None = None) -> None:
        """An episode ends. If it broke the serving simulator, that one is closed; the
        episodes parked on the host lose nothing (their state is values): their state
        is intact: they go on in the idle starter, which serves from then on (an episode
        parked on a scene the starter does not have ends with a simulator error)."""
        with self._lock:
            self.episodes.discard(view)
            if own is not None:
                if broken or self.starter is not None:
                    self._close(own)
                else:
                    self.starter = own
            if self.tenant is view:
                self.tenant = None
                if broken and self.serving is not None:
                    self._close(self.serving)
                    self.serving, self.starter = self.starter, None

    def close_idle(self) -> int:
        """Close what no episode uses; the number of simulators closed."""
        with self._lock:
            closed = 0
            if not self.episodes:
                for simulator in (self.serving, self.starter):
                    if simulator is not None:
                        self._close(simulator)
                        closed += 1
                self.serving = self.starter = None
                self.tenant = None
            return closed


class ParkedEpisode:
    """One live episode of a `TaskHost`, as the `Simulator` its runner drives."""

    def __init__(self, host: TaskHost) -> None:
        self.host = host
        self.control_cap = 0
        self.record_frames = False
        self.holding: Holding | None = None
        self.parked: object | None = None
        self.own: Simulator | None = None
        self._last: Simulator | None = None

    def set_control_cap(self, control_cap: int) -> None:
        self.control_cap = control_cap

    def _prepare(self, simulator: Simulator) -> Simulator:
        if simulator.control_cap != self.control_cap:
            simulator.set_control_cap(self.control_cap)
        simulator.record_frames = self.record_frames
        self._last = simulator
        return simulator

    def resolve_task(self, suite: str, task_index: int, task_order_index: int) -> TaskIdentity:
        starter = self.own or self.host._take_starter()
        try:
            return starter.resolve_task(suite, task_index, task_order_index)
        finally:
            if self.own is None:
                with self.host._lock:
                    if self.host.starter is None:
                        self.host.starter = starter
                    else:  # another start built one meanwhile: one is enough
                        self.host._close(starter)

    def start_episode(
        self, identity: TaskIdentity, init_state_index: int, seed: int
    ) -> EpisodeStart:
        starter = self._prepare(self.host._take_starter())
        try:
            start = starter.start_episode(identity, init_state_index, seed)
        except BaseException:
            self.own, self.holding = starter, "dedicated"  # closed with the episode
            raise
        self.host._settle(self, starter)
        return start

    def step(self, action: Sequence[float], *, observe: bool) -> ControlOutcome:
        if self.own is not None:
            return self._prepare(self.own).step(action, observe=observe)
        return self.host._run(self, lambda s: self._prepare(s).step(action, observe=observe))

    def detach(self) -> None:
        if self._last is not None:
            self._last.detach()

    def end(self, *, broken: bool) -> None:
        """The episode is over: its place on the host is given up (closing the
        serving simulator too if `broken`), and its own simulator, if it had one, becomes
        the host's starter if the host has none, or is closed."""
        own, self.own, self.parked = self.own, None, None
        self.host.leave(self, broken=broken, own=own)

    def close(self) -> None:
        self.end(broken=False)


def _close_quietly(simulator: Simulator) -> None:
    # A simulator that broke may not close cleanly: it is gone anyway.
    with contextlib.suppress(Exception):
        simulator.close()
