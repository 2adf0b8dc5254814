"""The task host's hand-overs (`sim/parked.py`), on the fake simulator (pure logic: the
real simulator's identity is `test_parked_identity.py`'s)."""

from __future__ import annotations

from collections.abc import Sequence

from mailroom.orchestrator.sim.base import ControlOutcome, Simulator
from mailroom.orchestrator.sim.fake import FakeSimulator, fake_identity
from mailroom.orchestrator.sim.parked import ParkedEpisode, TaskHost

ACT = [0.0] * 6 + [-1.0]
TASK = fake_identity("libero_10", 0)


class Unparkable:
    """A simulator that cannot park (a family's own, say): everything but `park`."""

    def __init__(self) -> None:
        self.inner = FakeSimulator(control_cap=100)
        self.control_cap = 100
        self.record_frames = False
        self.closed = False

    def set_control_cap(self, control_cap: int) -> None:
        self.control_cap = control_cap

    def resolve_task(self, suite: str, task_index: int, task_order_index: int) -> object:
        return self.inner.resolve_task(suite, task_index, task_order_index)

    def start_episode(self, identity: object, init_state_index: int, seed: int) -> object:
        return self.inner.start_episode(identity, init_state_index, seed)  # type: ignore[arg-type]

    def step(self, action: Sequence[float], *, observe: bool) -> ControlOutcome:
        return self.inner.step(action, observe=observe)

    def detach(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True


class Opened:
    """A factory that counts and keeps what it built."""

    def __init__(self, make: type = FakeSimulator) -> None:
        self.make = make
        self.built: list[object] = []

    def __call__(self) -> Simulator:
        simulator = FakeSimulator(control_cap=100) if self.make is FakeSimulator else Unparkable()
        self.built.append(simulator)
        return simulator  # type: ignore[return-value]


def frame(outcome: ControlOutcome) -> bytes:
    assert outcome.capture is not None
    return outcome.capture.images["agentview"].tobytes()


def start(host: TaskHost, state: int, seed: int) -> ParkedEpisode:
    view = host.episode()
    view.set_control_cap(100)
    view.start_episode(TASK, state, seed)
    return view


def run_alone(state: int, seed: int, controls: int) -> list[bytes]:
    alone = FakeSimulator(control_cap=100)
    alone.start_episode(TASK, state, seed)
    return [frame(alone.step(ACT, observe=True)) for _ in range(controls)]


def test_episodes_of_one_task_share_two_simulators_and_each_sees_its_own_run() -> None:
    opened = Opened()
    host = TaskHost(opened)
    views = [start(host, state, seed) for state, seed in ((0, 1), (1, 2), (2, 3))]
    assert [v.holding for v in views] == ["parked"] * 3
    assert len(opened.built) == 2 and host.simulators == 2
    seen: list[list[bytes]] = [[], [], []]
    for _ in range(4):
        for i, view in enumerate(views):
            seen[i].append(frame(view.step(ACT, observe=True)))
    for i, (state, seed) in enumerate(((0, 1), (1, 2), (2, 3))):
        assert seen[i] == run_alone(state, seed, 4), i
    assert seen[0] != seen[1]  # they differ: the comparison could fail
    for view in views:
        view.end(broken=False)
    assert host.close_idle() == 2


def test_a_simulator_that_cannot_park_holds_each_episode_on_its_own_and_is_reused() -> None:
    opened = Opened(Unparkable)
    host = TaskHost(opened)
    first, second = start(host, 0, 1), start(host, 1, 2)
    assert (first.holding, second.holding) == ("dedicated", "dedicated")
    assert len(opened.built) == 2 and first.own is not second.own
    first.step(ACT, observe=False)
    first.end(broken=False)  # its simulator becomes the host's starter
    third = start(host, 2, 3)
    assert len(opened.built) == 2 and third.holding == "dedicated"
    second.end(broken=True)  # a broken one is closed, never handed on
    assert isinstance(opened.built[1], Unparkable) and opened.built[1].closed


def test_an_episode_of_another_scene_gets_a_simulator_of_its_own() -> None:
    host = TaskHost(Opened())
    first = start(host, 0, 1)
    other = host.episode()
    other.set_control_cap(100)
    other.start_episode(fake_identity("libero_10", 3), 0, 1)
    assert (first.holding, other.holding) == ("parked", "dedicated")
    assert frame(other.step(ACT, observe=True)) and frame(first.step(ACT, observe=True))


def test_a_broken_serving_simulator_leaves_the_parked_episodes_to_the_starter() -> None:
    opened = Opened()
    host = TaskHost(opened)
    breaking, waiting = start(host, 0, 1), start(host, 1, 2)
    waiting.step(ACT, observe=True)
    breaking.step(ACT, observe=True)  # it runs in the serving simulator now
    breaking.end(broken=True)
    assert host.serving is opened.built[1] and host.starter is None
    # The waiting one goes on from its parked state, in what was the starter.
    rest = [frame(waiting.step(ACT, observe=True)) for _ in range(2)]
    assert rest == run_alone(1, 2, 3)[1:]
