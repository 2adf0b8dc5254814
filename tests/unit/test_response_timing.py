"""Timing stays honest when the worker is busy: a response is judged by when it arrived.

A response that arrived after its decision's deadline is a timeout however late the
worker looks (its file swept as a late stray), one that arrived before is served, and
one found by a scan rather than an event dates from its file's status-change time, so
that its wait in the queue is queueing delay and not the actor's latency.

Real endpoints watched by the real watchers (the worker's `InboxHub`, or a watcher's own
observer), the real runner, the worker's own serving (`LiveEpisodes._serve`); the
simulator is the simulator-free fake. A busy worker is a worker that does not look: the
test looks only once the moment it needs has passed, and waits for every event it needs
(an arrival noted) with a generous bound.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from mailbox_cases import LIMITS
from mailroom.mailbox.endpoint import Endpoint, create_endpoint
from mailroom.mailbox.parser import Accepted
from mailroom.mailbox.watcher import FallbackReason
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.campaign.capacity.memory import Admission, MemoryPolicy
from mailroom.orchestrator.campaign.live_episodes import LiveEpisode, LiveEpisodes, task_key
from mailroom.orchestrator.episode.evidence import EpisodeEvidence
from mailroom.orchestrator.episode.runner import Awaiting, EpisodeRequest, EpisodeRunner
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.perf.detection import write_response
from mailroom.orchestrator.records.confinement import ConfinementRecord
from mailroom.orchestrator.records.result import EpisodeResult
from mailroom.orchestrator.sim.fake import FAKE_IDENTITY, FakeSimulator
from mailroom.orchestrator.transport.mailbox import MailboxTransport
from recorded_events import attempt_events
from transport_deliveries import small_delivery
from watchdog.observers.inotify_c import InotifyFD

K = 3
# The bound on every wait for an event (an arrival noted): never reached when all is well.
EVENT_WAIT_S = 30.0
# How long the worker is held up elsewhere while a response waits in its inbox.
BUSY_S = 0.3
CASE = SimpleNamespace(case_id="c-1", suite="libero_10", task_index=0, task_order_index=0)


def _request() -> EpisodeRequest:
    return EpisodeRequest(
        "a-1", "c-1", FAKE_IDENTITY, 0, 0, K, ConfinementRecord(mode="none", network="host"), "v1"
    )


def _settings(response_timeout_s: float) -> RunSettings:
    # One decision; the fake succeeds natively at its first control, so an accepted
    # response ends the episode a success, and a missed one an actor timeout.
    return RunSettings(max_policy_calls=1, replan_interval=K, response_timeout_s=response_timeout_s)


def _body(request_id: str) -> bytes:
    return json.dumps(
        {
            "schema": "mailroom.response/v1",
            "request_id": request_id,
            "decision": "act",
            "actions": [[0.1, 0, 0, 0, 0, 0, -1]] * K,
        }
    ).encode()


def _past(moment: float) -> None:
    """Return once the monotonic clock is past `moment`."""
    while (left := moment - time.monotonic()) >= 0:
        time.sleep(left + 0.001)


def _arrival_noted(transport: MailboxTransport, name: str) -> float:
    """Wait for the watcher's event on `name` (bounded) and return its arrival time."""
    give_up = time.monotonic() + EVENT_WAIT_S
    while (arrived := transport.watcher.arrival_of(name)) is None:
        assert time.monotonic() < give_up, f"no event noted for {name}"
        time.sleep(0.001)
    return arrived


def _finished(events: list[dict[str, Any]]) -> tuple[str, str | None]:
    [finished] = [e for e in events if e["event"] == "episode_finished"]
    return finished["outcome"], finished["termination"]


@dataclass
class Worker:
    """One live episode on a real worker's serving loop, stopped at its first wait."""

    live: LiveEpisodes
    episode: LiveEpisode
    transport: MailboxTransport
    endpoint: Endpoint
    evidence: EpisodeEvidence
    reports: list[tuple[Any, ...]]
    published_by: float  # the observation was published no earlier than this

    @property
    def waiting(self) -> Awaiting:
        assert self.episode.waiting is not None
        return self.episode.waiting


def _worker(
    tmp_path: Path, response_timeout_s: float = 60.0, *, taken_up_late: bool = False
) -> Iterator[Worker]:
    """`taken_up_late`: the worker takes up the first wait only once its deadline has
    passed (busy serving others while the starter thread published it)."""
    settings = _settings(response_timeout_s)
    reports: list[tuple[Any, ...]] = []
    config = SimpleNamespace(
        kept=None, settings=settings, slots=1, holding="dedicated", limits=ActorLimits()
    )
    live = LiveEpisodes(config, FakeSimulator, reports.append, Admission(MemoryPolicy()))
    endpoint = create_endpoint(tmp_path / "mailbox")
    evidence = EpisodeEvidence(tmp_path / "private" / "episodes" / "a-1")
    transport = MailboxTransport(endpoint, evidence, hub=live.hub)
    simulator = FakeSimulator(control_cap=K, succeed_at=1)
    steps = EpisodeRunner(simulator, settings).steps(_request(), transport, evidence)
    episode = LiveEpisode(SimpleNamespace(case=CASE, attempt=1), steps, simulator, task_key(CASE))
    live.live.append(episode)
    published_by = time.monotonic()
    first = next(steps)  # obs-1 is published
    assert isinstance(first, Awaiting)
    if taken_up_late:
        _past(first.published_at + response_timeout_s)
    live._after(episode, first)  # the worker waits for resp-1
    try:
        yield Worker(live, episode, transport, endpoint, evidence, reports, published_by)
    finally:
        steps.close()
        live.hub.close()
        evidence.close()
        endpoint.held.close()


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Worker]:
    yield from _worker(tmp_path)


def test_a_response_that_arrived_before_its_deadline_is_served_after_it(worker: Worker) -> None:
    """The actor answers in time; the worker, busy elsewhere, looks only once the
    deadline has passed: the response is served, as it always was."""
    write_response(worker.endpoint.response_file(1), _body(worker.waiting.delivery.request_id))
    arrived = _arrival_noted(worker.transport, "resp-1.json")
    # The deadline falls between the arrival and the worker's look.
    worker.episode.deadline = arrived + 0.05
    _past(worker.episode.deadline)
    worker.live._serve()
    assert worker.live.live == []
    assert worker.reports[-1][:4] == ("finished", "c-1", 1, "success")
    worker.evidence.close()
    events = attempt_events(worker.evidence.directory)
    assert _finished(events) == ("success", "native_success")
    [claimed] = [e for e in events if e["event"] == "response_claimed"]
    assert claimed["outcome"] == "accepted"
    assert not [e for e in events if e["event"] == "late_response"]


def test_a_response_that_arrived_after_its_deadline_is_a_timeout_though_looked_at_later(
    worker: Worker,
) -> None:
    """The deadline passes while the worker is busy; the actor answers after it, before
    the worker looks: a timeout, as if the worker had looked at the deadline, and the
    file is kept as a late stray, never judged."""
    worker.episode.deadline = time.monotonic()  # passed while the worker was busy
    body = _body(worker.waiting.delivery.request_id)
    write_response(worker.endpoint.response_file(1), body)
    arrived = _arrival_noted(worker.transport, "resp-1.json")
    assert arrived > worker.episode.deadline
    worker.live._serve()  # the worker looks only now: the response is in the inbox
    assert worker.live.live == []
    assert worker.reports[-1][:4] == ("finished", "c-1", 1, "error")
    worker.evidence.close()
    events = attempt_events(worker.evidence.directory)
    assert _finished(events) == ("error", "actor_timeout")
    kinds = [e["event"] for e in events]
    assert "response_claimed" not in kinds and "decision_served" not in kinds
    [late] = [e for e in events if e["event"] == "late_response"]
    assert (late["stray_kind"], late["name"]) == ("late", "resp-1.json")
    assert late["sha256"] == hashlib.sha256(body).hexdigest()
    strays = worker.evidence.responses_dir / "strays"
    assert [p.read_bytes() for p in strays.iterdir()] == [body]
    assert list(worker.endpoint.inbox.iterdir()) == []


@pytest.fixture
def scanning_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Worker]:
    """A worker whose hub cannot start its inotify reader: every inbox is scanned."""

    def no_instance(cls: type[InotifyFD]) -> int:
        raise OSError(errno.EMFILE, "inotify instance limit reached")

    monkeypatch.setattr(InotifyFD, "_create_inotify_fd", classmethod(no_instance))
    yield from _worker(tmp_path)


def test_a_response_found_by_a_scan_has_its_wait_as_queueing_delay(
    scanning_worker: Worker,
) -> None:
    """The response waits BUSY_S in the inbox while the worker is busy; no event says when
    it came, the scan finds it: its file's status-change time dates it, so the wait is
    queueing delay, not the actor's latency."""
    worker = scanning_worker
    assert worker.transport.watcher.fallback_reason is FallbackReason.START_FAILED
    write_response(worker.endpoint.response_file(1), _body(worker.waiting.delivery.request_id))
    written = time.monotonic()
    _past(written + BUSY_S)
    worker.live._serve()
    assert worker.transport.watcher.arrival_of("resp-1.json") is None  # no event: a scan
    assert worker.live.live == []
    worker.evidence.close()
    events = attempt_events(worker.evidence.directory)
    assert _finished(events) == ("success", "native_success")
    [served] = [e for e in events if e["event"] == "decision_served"]
    # The kernel's clock for ctime is coarse (it lags, never leads): the arrival comes
    # out no later than the write, so the whole busy wait is queueing delay...
    assert served["queue_delay_ms"] >= BUSY_S * 1000 - 1, served
    # ... and the actor's latency ends by the write, from a publication no earlier
    # than `published_by`.
    assert served["latency_ms"] <= (written - worker.published_by) * 1000 + 1, served


class _AnswerAfterTheDeadline(threading.Event):
    """A watcher's wake-up event whose wait runs out the deadline, then lets the actor
    answer, and returns once the answer's event is noted: the waiter's next look comes
    after a response that arrived after its deadline (a waiter held up under load)."""

    def __init__(self, transport: MailboxTransport) -> None:
        super().__init__()
        self.transport = transport
        self.body: bytes | None = None

    def wait(self, timeout: float | None = None) -> bool:
        entered = time.monotonic()
        if self.body is not None or timeout is None:
            return super().wait(timeout)
        super().wait(timeout)
        _past(entered + timeout)  # the wait was bounded by the deadline: it has passed
        endpoint = self.transport.endpoint
        observation = json.loads((endpoint.outbox / "obs-1.json").read_text())
        self.body = _body(observation["request_id"])
        write_response(endpoint.response_file(1), self.body)
        _arrival_noted(self.transport, "resp-1.json")
        return True


def test_alone_a_response_that_arrived_after_the_deadline_is_a_timeout(tmp_path: Path) -> None:
    """One episode driven alone (its watcher's own inotify thread): a response that
    arrives after the deadline but before the waiter's last look is a timeout too."""
    endpoint = create_endpoint(tmp_path / "mailbox")
    evidence = EpisodeEvidence(tmp_path / "private" / "episodes" / "a-1")
    # No periodic scan within the wait: its one wait runs to the deadline.
    transport = MailboxTransport(endpoint, evidence, scan_interval=60.0)
    answer = _AnswerAfterTheDeadline(transport)
    transport.watcher._event = answer
    runner = EpisodeRunner(FakeSimulator(control_cap=K, succeed_at=1), _settings(0.5))
    result: EpisodeResult
    try:
        result = runner.run(_request(), transport, evidence)
    finally:
        evidence.close()
        endpoint.held.close()
    assert answer.body is not None  # the actor did answer, late
    assert (result.outcome, result.termination) == ("error", "actor_timeout")
    [error] = result.errors
    assert (error.kind, error.code) == ("actor_timeout", "response_deadline_missed")
    events = attempt_events(evidence.directory)
    assert "response_claimed" not in [e["event"] for e in events]
    [late] = [e for e in events if e["event"] == "late_response"]
    assert (late["stray_kind"], late["name"]) == ("late", "resp-1.json")
    assert [p.read_bytes() for p in (evidence.responses_dir / "strays").iterdir()] == [answer.body]


def test_a_response_there_before_its_observation_dates_from_the_publication(
    tmp_path: Path,
) -> None:
    """A file that was in the inbox before the observation was published (its event
    forgotten with the publication, so a scan dates it) counts as arriving at the
    publication: its ctime is earlier, and no answer comes before its question."""
    endpoint = create_endpoint(tmp_path / "mailbox")
    evidence = EpisodeEvidence(tmp_path / "private" / "episodes" / "a-1")
    transport = MailboxTransport(endpoint, evidence)
    try:
        delivery = small_delivery(1)
        write_response(endpoint.response_file(1), _body(delivery.request_id))
        _arrival_noted(transport, "resp-1.json")  # then forgotten by the publication
        transport.deliver(delivery)
        assert transport.watcher.arrival_of("resp-1.json") is None
        assert isinstance(transport.await_decision(delivery, LIMITS, EVENT_WAIT_S), Accepted)
        arrival = transport.arrival()
        assert arrival.arrived_at == transport.receiver.published_at < arrival.served_at
        transport.close(1)
    finally:
        evidence.close()
        endpoint.held.close()


def test_a_first_wait_taken_up_late_keeps_its_deadline_from_the_publication(
    tmp_path: Path,
) -> None:
    """The deadline runs from the observation's publication, not from when a busy worker
    takes up the wait: an answer that came after it is late."""
    with contextlib.contextmanager(_worker)(tmp_path, 0.2, taken_up_late=True) as worker:
        assert worker.episode.deadline == worker.waiting.published_at + 0.2
        assert worker.episode.deadline < time.monotonic()
        write_response(worker.endpoint.response_file(1), _body(worker.waiting.delivery.request_id))
        assert _arrival_noted(worker.transport, "resp-1.json") > worker.episode.deadline
        worker.live._serve()
        assert worker.reports[-1][:4] == ("finished", "c-1", 1, "error")
        worker.evidence.close()
        events = attempt_events(worker.evidence.directory)
        assert _finished(events) == ("error", "actor_timeout")
        assert [e["name"] for e in events if e["event"] == "late_response"] == ["resp-1.json"]
