"""One hub for many inboxes: real directories, real inotify, the real watchers."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from kernel_limit_values import max_queued_events
from mailroom.mailbox.inbox_hub import InboxHub
from mailroom.mailbox.watcher import FALLBACK_SCAN_INTERVAL, FallbackReason, InboxWatcher


def _arrive(inbox: Path, name: str) -> None:
    tmp = inbox / f".{name}.tmp"
    tmp.write_text("{}")
    os.replace(tmp, inbox / name)


def _watchers(tmp_path: Path, hub: InboxHub, n: int) -> list[InboxWatcher]:
    watchers = []
    for i in range(n):
        inbox = tmp_path / f"inbox-{i}"
        inbox.mkdir()
        watcher = InboxWatcher(inbox, hub=hub)
        watcher.start()
        watchers.append(watcher)
    return watchers


def test_twenty_inboxes_share_one_reader_thread(tmp_path: Path) -> None:
    """The threads the twenty watchers started, by identity (a thread of an earlier test
    ending meanwhile changes nothing): exactly one, the hub's reader, gone once closed."""
    hub = InboxHub()
    before = set(threading.enumerate())
    watchers = _watchers(tmp_path, hub, 20)
    try:
        started = set(threading.enumerate()) - before
        assert len(started) == 1 and hub.alive, started
    finally:
        for watcher in watchers:
            watcher.stop()
        hub.close()
    [reader] = started
    reader.join(timeout=30.0)
    assert not reader.is_alive()


def test_an_arrival_wakes_the_hub_and_marks_only_its_own_inbox(tmp_path: Path) -> None:
    hub = InboxHub()
    first, second = _watchers(tmp_path, hub, 2)
    try:
        assert not hub.wait(0.05)  # nothing arrived
        sent = time.monotonic()
        _arrive(first.inbox, "resp-1.json")
        assert hub.wait(5.0)
        deadline = time.monotonic() + 5
        while first.unseen_since() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        since = first.unseen_since()
        assert since is not None and sent <= since <= time.monotonic()
        assert second.unseen_since() is None
        # The response's own arrival is kept for its queueing delay (the temp file's
        # creation came before it, and woke the hub first).
        while first.arrival_of("resp-1.json") is None and time.monotonic() < deadline:
            time.sleep(0.001)
        arrived = first.arrival_of("resp-1.json")
        assert arrived is not None and arrived >= since
        # A look clears what it has seen; the arrival time stays until forgotten.
        assert first.poll(lambda: True) is True
        assert first.unseen_since() is None and first.arrival_of("resp-1.json") == arrived
        first.forget_arrivals()
        assert first.arrival_of("resp-1.json") is None
    finally:
        first.stop()
        second.stop()
        hub.close()


def test_a_stopped_watcher_is_no_longer_woken(tmp_path: Path) -> None:
    hub = InboxHub()
    first, second = _watchers(tmp_path, hub, 2)
    try:
        first.stop()
        _arrive(first.inbox, "resp-1.json")
        _arrive(second.inbox, "resp-1.json")
        assert hub.wait(5.0)
        deadline = time.monotonic() + 30
        while second.arrival_of("resp-1.json") is None and time.monotonic() < deadline:
            time.sleep(0.001)
        assert second.arrival_of("resp-1.json") is not None
        # One reader reads the hub's one inotify queue in order: had the stopped watcher
        # still been watched, its earlier arrival would have been marked by now.
        assert first.unseen_since() is None and first.arrival_of("resp-1.json") is None
    finally:
        second.stop()
        hub.close()


def test_a_dead_reader_makes_every_watcher_fall_back_to_scanning(tmp_path: Path) -> None:
    hub = InboxHub()
    watchers = _watchers(tmp_path, hub, 3)
    try:
        hub.close()  # the reader thread ends, as if it had died
        for watcher in watchers:
            assert watcher.poll(lambda: None) is None
            assert watcher.fallback_reason is FallbackReason.OBSERVER_DIED
            assert watcher.recheck_interval == FALLBACK_SCAN_INTERVAL
        # Scanning still finds what arrives.
        _arrive(watchers[0].inbox, "resp-1.json")
        target = watchers[0].inbox / "resp-1.json"
        assert watchers[0].poll(lambda: True if target.exists() else None) is True
    finally:
        for watcher in watchers:
            watcher.stop()


def test_a_kernel_queue_overflow_in_one_inbox_reaches_every_watcher(tmp_path: Path) -> None:
    """A real IN_Q_OVERFLOW, caused in one inbox while the hub's reader is held off:
    the kernel queue is the hub's, so every watcher on it falls back to scanning."""
    hub = InboxHub()
    watchers = _watchers(tmp_path, hub, 2)
    try:
        reader = hub._fd
        assert reader is not None
        here, there = watchers[0].inbox / ".x", watchers[0].inbox / ".y"
        here.touch()
        with reader._lock:  # the reader takes this lock around every read
            # Moves back and forth: never two alike in a row, so none coalesce.
            for _ in range(max_queued_events() + 5000):
                os.rename(here, there)
                here, there = there, here
        deadline = time.monotonic() + 10
        while any(w.fallback_reason is None for w in watchers) and time.monotonic() < deadline:
            hub.wait(0.05)
            for watcher in watchers:
                watcher.poll(lambda: None)
        assert [w.fallback_reason for w in watchers] == [FallbackReason.QUEUE_OVERFLOW] * 2
        # Scanning still finds a response in the other inbox.
        _arrive(watchers[1].inbox, "resp-1.json")
        target = watchers[1].inbox / "resp-1.json"
        assert watchers[1].poll(lambda: True if target.exists() else None) is True
    finally:
        for watcher in watchers:
            watcher.stop()
        hub.close()
