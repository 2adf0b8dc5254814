"""MailboxTransport end to end on real files: decisions, strays, late files, evidence.

No simulator: a capture is a few small arrays, and the actor is this test writing files.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import leaks_under
from mailbox_cases import LIMITS, encode, write_atomically
from mailroom.mailbox.endpoint import Endpoint, create_endpoint
from mailroom.mailbox.feedback import bounded_feedback
from mailroom.mailbox.parser import Accepted, Invalid, ProtocolError, ProtocolReason
from mailroom.mailbox.publish import OutboxDurability
from mailroom.mailbox.schemas import schema_errors
from mailroom.mailbox.watcher import WatchMode
from mailroom.measures import CLOCK
from mailroom.orchestrator.episode.evidence import EpisodeEvidence
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.transport.base import TimedOut
from mailroom.orchestrator.transport.mailbox import MailboxTransport
from recorded_events import attempt_events
from transport_deliveries import CAPTURE, small_delivery
from watchdog.observers.inotify_c import InotifyFD

PRIVATE_NAME = "run-libero_10-task0-seed20260907"


def _answer(endpoint: Endpoint, name: str, build: Any) -> threading.Thread:
    """The actor: reads the newest observation, then writes `build(observation)` as `name`."""

    def run() -> None:
        time.sleep(0.02)
        newest = max(endpoint.outbox.glob("obs-*.json"), key=lambda p: p.stat().st_mtime_ns)
        observation = json.loads(newest.read_text())
        write_atomically(endpoint.inbox / name, encode(build(observation)))

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _act(observation: dict[str, Any], value: float = 0.1) -> dict[str, Any]:
    return {
        "schema": "mailroom.response/v1",
        "request_id": observation["request_id"],
        "decision": "act",
        "actions": [[value, 0, 0, 0, 0, 0, -1]],
    }


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Endpoint, EpisodeEvidence]]:
    endpoint = create_endpoint(tmp_path / "mailbox")
    evidence = EpisodeEvidence(tmp_path / PRIVATE_NAME / "episodes" / "a-1")
    yield endpoint, evidence
    evidence.close()


@pytest.mark.parametrize("mode", ["inotify", "polling"])
def test_an_exchange_with_every_kind_of_outcome(
    setup: tuple[Endpoint, EpisodeEvidence], mode: WatchMode, tmp_path: Path
) -> None:
    endpoint, evidence = setup
    transport = MailboxTransport(endpoint, evidence, watch_mode=mode)

    first = small_delivery(1)
    transport.deliver(first)
    _answer(endpoint, "resp-1.json", _act).join()
    outcome = transport.await_decision(first, LIMITS, 10.0)
    assert isinstance(outcome, Accepted) and outcome.actions == ((0.1, 0, 0, 0, 0, 0, -1),)

    second = small_delivery(2)
    transport.deliver(second)
    writer = _answer(endpoint, "resp-2.json", lambda o: _act(o, 1.5))
    rejected = transport.await_decision(second, LIMITS, 10.0)
    writer.join()
    assert isinstance(rejected, Invalid) and rejected.reason == "out_of_bounds"

    third = small_delivery(3, bounded_feedback(2, rejected.issues))
    transport.deliver(third)
    writer = _answer(endpoint, "resp-2.json", _act)  # answers under the old name again
    duplicate = transport.await_decision(third, LIMITS, 10.0)
    writer.join()
    assert isinstance(duplicate, ProtocolError)
    assert duplicate.reason is ProtocolReason.DUPLICATE_RESPONSE

    write_atomically(endpoint.response_file(3), encode(_act({"request_id": third.request_id})))
    transport.close(3)
    write_atomically(endpoint.response_file(4), b"{}")
    assert transport.sweep_late() == 1

    kinds = [
        (e["event"], e.get("sequence"), e.get("outcome"))
        for e in attempt_events(evidence.directory)
    ]
    assert kinds == [
        ("first_observation_publishing", None, None),
        ("observation_published", 1, None),
        ("response_claimed", 1, "accepted"),
        ("observation_published", 2, None),
        ("response_claimed", 2, "invalid"),
        ("observation_published", 3, None),
        ("stray_response", 3, None),
        ("response_rejected", 3, "protocol_error"),
        ("closed_published", None, None),
        ("late_response", None, None),
        ("late_response", None, None),
    ]
    events = attempt_events(evidence.directory)
    assert events[4]["reasons"] == ["out_of_bounds"]
    assert (events[6]["stray_kind"], events[6]["name"]) == ("duplicate", "resp-2.json")
    assert events[7]["reason"] == "duplicate_response"
    assert [(e["stray_kind"], e["name"]) for e in events[9:]] == [
        ("late", "resp-3.json"),
        ("late", "resp-4.json"),
    ]
    responses = evidence.directory / "responses"
    assert sorted(p.name for p in responses.iterdir()) == ["resp-1.json", "resp-2.json", "strays"]
    assert len(list((responses / "strays").iterdir())) == 3

    # The actor's side holds the protocol's files and nothing else: no evidence, no
    # temporary names, nothing that names the run.
    ep = endpoint.root
    assert sorted(p.name for p in endpoint.outbox.iterdir()) == [
        "closed.json",
        "obs-1-agentview.png",
        "obs-1.json",
        "obs-2-agentview.png",
        "obs-2.json",
        "obs-3-agentview.png",
        "obs-3.json",
    ]
    assert list(endpoint.inbox.iterdir()) == [] and list(endpoint.scratch.iterdir()) == []
    needles = [PRIVATE_NAME, "libero", "seed", "events", "strays", str(tmp_path / PRIVATE_NAME)]
    assert leaks_under(ep.parent, needles) == []
    obs3 = json.loads((endpoint.outbox / "obs-3.json").read_text())
    assert schema_errors("mailroom.observation/v1", obs3) == []
    assert obs3["feedback"]["issues"][0]["code"] == "out_of_bounds"


def test_a_silent_actor_times_out_and_a_retry_still_gets_the_answer(
    setup: tuple[Endpoint, EpisodeEvidence],
) -> None:
    endpoint, evidence = setup
    transport = MailboxTransport(endpoint, evidence)
    first = small_delivery(1)
    transport.deliver(first)
    assert isinstance(transport.await_decision(first, LIMITS, 0.2), TimedOut)
    write_atomically(endpoint.response_file(1), encode(_act({"request_id": first.request_id})))
    assert isinstance(transport.await_decision(first, LIMITS, 10.0), Accepted)
    transport.close(1)


def test_a_watcher_fallback_is_recorded_and_changes_nothing_else(
    setup: tuple[Endpoint, EpisodeEvidence], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_instance(cls: type[InotifyFD]) -> int:
        raise OSError(errno.EMFILE, "inotify instance limit reached")

    monkeypatch.setattr(InotifyFD, "_create_inotify_fd", classmethod(no_instance))
    endpoint, evidence = setup
    transport = MailboxTransport(endpoint, evidence, watch_mode="inotify")
    first = small_delivery(1)
    transport.deliver(first)
    _answer(endpoint, "resp-1.json", _act).join()
    assert isinstance(transport.await_decision(first, LIMITS, 10.0), Accepted)
    transport.close(1)
    fell_back = attempt_events(evidence.directory, "watcher_fell_back")
    assert [e["reason"] for e in fell_back] == ["observer_start_failed"]


def test_the_transport_does_not_load_the_simulator() -> None:
    code = (
        "import sys, mailroom.orchestrator.transport.mailbox, mailroom.mailbox.receiver\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in "
        "('libero', 'robosuite', 'mujoco')]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ}, timeout=60)


@pytest.mark.parametrize(
    ("durability", "expected"),
    [
        # deliver: each staged file (one image, the document), then the outbox; close:
        # the notice, then the outbox.
        ("durable", ["file", "file", "dir", "file", "dir"]),
        ("atomic", []),
    ],
)
def test_the_declared_outbox_durability_reaches_every_publication(
    setup: tuple[Endpoint, EpisodeEvidence],
    monkeypatch: pytest.MonkeyPatch,
    durability: OutboxDurability,
    expected: list[str],
) -> None:
    endpoint, evidence = setup
    transport = MailboxTransport(endpoint, evidence, outbox_durability=durability)
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    first = small_delivery(1)
    transport.deliver(first)
    transport.close(1)
    monkeypatch.undo()
    assert synced == expected
    # Atomic either way: whole files under their final names, no temporary name left.
    assert sorted(p.name for p in endpoint.outbox.iterdir()) == [
        "closed.json",
        "obs-1-agentview.png",
        "obs-1.json",
    ]
    published = json.loads((endpoint.outbox / "obs-1.json").read_text())
    assert published["request_id"] == first.request_id
    assert json.loads((endpoint.outbox / "closed.json").read_text())["last_sequence"] == 1


@pytest.mark.parametrize("durability", ["atomic", "durable"])
def test_the_outbox_is_synced_only_when_the_run_declares_it_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durability: OutboxDurability
) -> None:
    """What each setting does to the outbox: `durable` fsyncs every published file and
    the folder; the default, `atomic`, fsyncs nothing there (a rename only)."""
    assert RunSettings().outbox_durability == "atomic"
    with pytest.raises(ValueError):
        RunSettings.model_validate({"outbox_durability": "fsync"})
    endpoint = create_endpoint(tmp_path / "mb")
    evidence = EpisodeEvidence(tmp_path / "run" / "episodes" / "a-1")
    synced: list[str] = []
    real_fsync = os.fsync

    def recording(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording)
    transport = MailboxTransport(endpoint, evidence, outbox_durability=durability)
    try:
        transport.deliver(small_delivery(1))
    finally:
        monkeypatch.setattr(os, "fsync", real_fsync)
        transport.close(1)
        evidence.close()
    outbox = str(endpoint.outbox)
    in_outbox = [p for p in synced if p == outbox or p.startswith(outbox + "/")]
    if durability == "atomic":
        assert in_outbox == []
        return
    assert outbox in in_outbox  # the folder, once the files are renamed
    staged = [re.fullmatch(r"\.(.+)\.[0-9a-f]{12}\.tmp", Path(p).name) for p in in_outbox]
    assert {m.group(1) for m in staged if m} == {
        "obs-1.json",
        *(f"obs-1-{camera}.png" for camera in CAPTURE.images),
    }


def test_the_decision_cycle_ends_when_the_observation_is_published(
    setup: tuple[Endpoint, EpisodeEvidence],
) -> None:
    endpoint, evidence = setup
    transport = MailboxTransport(endpoint, evidence)
    CLOCK.reset(enabled=True)
    try:
        CLOCK.begin_cycle()
        transport.deliver(small_delivery(1))
        cycles, samples = CLOCK.cycles, dict(CLOCK.samples)
    finally:
        CLOCK.reset(enabled=False)
        transport.close(1)
    # Publication closes the cycle; the evidence kept after it is sampled apart and
    # attributed to that cycle, outside its time.
    assert len(cycles) == 1
    assert {"encode", "observation_document", "publish", "cycle"} <= set(cycles[0])
    assert len(samples["after_publication"]) == 1
    assert cycles[0]["after_publication"] == samples["after_publication"][0]
    logged = [e["event"] for e in attempt_events(evidence.directory)]
    assert logged[:2] == ["first_observation_publishing", "observation_published"]
