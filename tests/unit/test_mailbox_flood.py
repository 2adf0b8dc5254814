"""An inbox flooded with files: the awaited response is still found, claimed once.

Thousands of names that are not the awaited response (notes, temporary names,
near-misses of the protocol's name) are ignored and left alone, before and while the
orchestrator waits. Thousands of other `resp-<m>.json` names are a protocol break:
the typed `unexpected_response`, with one stray kept as evidence and nothing executed.
Through the real watcher (both modes), receiver, claim and parser. Elapsed times are
printed, never asserted.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from mailbox_cases import LIMITS, REQUEST_ID, VALID, encode, response, write_atomically
from mailroom.mailbox.endpoint import Endpoint, create_endpoint
from mailroom.mailbox.parser import Accepted, ProtocolError, ProtocolReason
from mailroom.mailbox.receiver import Reception, ResponseReceiver
from mailroom.mailbox.watcher import InboxWatcher, WatchMode

BOUND_S = 30.0
JUNK_BEFORE = 4000
JUNK_DURING = 2000


def junk_name(i: int) -> str:
    """Names an actor (or its tools) might leave in the inbox; none is a response name."""
    kinds = (
        f"note-{i}.txt",
        f".resp-1.json.{i}.tmp",  # hidden temporary names, even of the awaited response
        f"resp-{i}.json.tmp",
        f"resp-{i}.JSON",
        f"resp-0{i}.json",  # leading zero
        f"response-{i}.json",
        f"resp-{i}.json~",
        f"resp--{i}.json",
    )
    return kinds[i % len(kinds)]


@dataclass
class Inbox:
    endpoint: Endpoint
    receiver: ResponseReceiver
    watcher: InboxWatcher
    private: Path

    def names(self) -> set[str]:
        return set(os.listdir(self.endpoint.inbox))


@pytest.fixture(params=["inotify", "polling"])
def inbox(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Inbox]:
    mode: WatchMode = request.param
    endpoint = create_endpoint(tmp_path / "mailbox")
    private = tmp_path / "private"
    with InboxWatcher(endpoint.held.watch_path("inbox"), mode=mode) as watcher:
        yield Inbox(endpoint, ResponseReceiver(endpoint, private, watcher), watcher, private)


def _junk(folder: Path, start: int, count: int) -> set[str]:
    names = {junk_name(i) for i in range(start, start + count)}
    for name in names:
        (folder / name).write_bytes(b"junk")
    return names


def test_junk_does_not_hide_the_response(inbox: Inbox) -> None:
    folder = inbox.endpoint.inbox
    junk = _junk(folder, 0, JUNK_BEFORE)
    (folder / "a-folder").mkdir()
    os.mkfifo(folder / "a-fifo")
    os.symlink("/nonexistent", folder / "a-link")
    junk |= {"a-folder", "a-fifo", "a-link"}

    def actor() -> None:
        # More junk while the orchestrator waits; the answer lands in the middle of it.
        junk.update(_junk(folder, JUNK_BEFORE, JUNK_DURING // 2))
        write_atomically(inbox.endpoint.response_file(1), VALID)
        junk.update(_junk(folder, JUNK_BEFORE + JUNK_DURING // 2, JUNK_DURING // 2))

    thread = threading.Thread(target=actor)
    started = time.perf_counter()
    thread.start()
    received = inbox.receiver.receive(1, REQUEST_ID, LIMITS, BOUND_S)
    elapsed = time.perf_counter() - started
    thread.join()
    print(f"\n{inbox.watcher.mode}: found among {len(junk)} junk entries in {elapsed:.3f} s")
    assert isinstance(received, Reception) and isinstance(received.outcome, Accepted)
    assert (inbox.private / "resp-1.json").read_bytes() == VALID
    # Claimed once; every junk entry left where it was, nothing else taken.
    assert sorted(p.name for p in inbox.private.iterdir()) == ["resp-1.json"]
    assert inbox.names() == junk
    assert inbox.receiver.sweep_late() == []
    assert not inbox.watcher.fell_back, inbox.watcher.fallback_detail

    # The next request in the same flooded inbox.
    second = "00112233445566778899aabbccddeeff"
    data = encode(response(request_id=second))
    write_atomically(inbox.endpoint.response_file(2), data)
    received = inbox.receiver.receive(2, second, LIMITS, BOUND_S)
    assert isinstance(received, Reception) and isinstance(received.outcome, Accepted)
    assert (inbox.private / "resp-2.json").read_bytes() == data
    assert inbox.names() == junk


def test_a_flood_of_other_response_names_is_unexpected(inbox: Inbox) -> None:
    folder = inbox.endpoint.inbox
    others = {f"resp-{m}.json" for m in range(2, 3002)}
    for name in others:
        write_atomically(folder / name, encode(response()))
    write_atomically(inbox.endpoint.response_file(1), VALID)
    started = time.perf_counter()
    received = inbox.receiver.receive(1, REQUEST_ID, LIMITS, BOUND_S)
    elapsed = time.perf_counter() - started
    print(f"\n{inbox.watcher.mode}: {len(others)} other response names judged in {elapsed:.3f} s")
    assert isinstance(received, Reception)
    outcome = received.outcome
    assert isinstance(outcome, ProtocolError)
    assert outcome.reason is ProtocolReason.UNEXPECTED_RESPONSE
    # One stray (the lowest sequence) taken as evidence; the awaited file not executed.
    assert received.stray is not None and received.stray.name == "resp-2.json"
    assert received.claimed is None and not (inbox.private / "resp-1.json").exists()
    assert len(list((inbox.private / "strays").iterdir())) == 1
    assert inbox.names() == (others - {"resp-2.json"}) | {"resp-1.json"}
