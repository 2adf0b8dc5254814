"""The inbox watcher: events in both modes, and a fallback that never hangs.

Failures are injected where watchdog meets the kernel (inotify_init, adding a watch,
the reader thread); the waits themselves are real, on real files.
"""

from __future__ import annotations

import errno
import functools
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kernel_limit_values import max_queued_events
from mailbox_cases import write_atomically
from mailroom.mailbox.watcher import (
    FallbackReason,
    InboxWatcher,
    InotifyObserver,
    WatchMode,
    _Wakeup,
)
from watchdog.observers.inotify_c import InotifyFD

BOUND_S = 10.0


def _later(action: Callable[[], object], delay: float = 0.02) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        action()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _settle(watcher: InboxWatcher) -> None:
    """One zero-length wait: the watcher looks at its observer once more."""
    assert watcher.wait_until(lambda: None, 0.0) is None


@pytest.fixture
def inbox(tmp_path: Path) -> Path:
    path = tmp_path / "inbox"
    path.mkdir()
    return path


@pytest.fixture(params=["inotify", "polling"])
def watcher(request: pytest.FixtureRequest, inbox: Path) -> Iterator[InboxWatcher]:
    mode: WatchMode = request.param
    with InboxWatcher(inbox, mode=mode) as running:
        yield running


def test_atomic_and_plain_writes_both_wake_the_waiter(watcher: InboxWatcher, inbox: Path) -> None:
    thread = _later(lambda: write_atomically(inbox / "a.json", b"{}"))
    assert watcher.wait_for("a.json", BOUND_S)
    thread.join()
    thread = _later(lambda: (inbox / "b.json").write_bytes(b"{}"))
    assert watcher.wait_for("b.json", BOUND_S)
    thread.join()
    assert not watcher.fell_back and watcher.observer is not None


def test_the_inotify_reader_itself_wakes_the_waiter(
    inbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """watchdog's own handler never fires here and the scan is an hour away: only the
    reader thread's wake-up can end a wait before its deadline (after the deadline, the
    last look would find the file anyway)."""
    monkeypatch.setattr(_Wakeup, "on_any_event", lambda self, event: None)
    writes: list[tuple[str, Callable[[], object]]] = [
        ("a.json", functools.partial(write_atomically, inbox / "a.json", b"{}")),
        ("b.json", functools.partial((inbox / "b.json").write_bytes, b"{}")),
    ]
    with InboxWatcher(inbox, mode="inotify", scan_interval=3600.0) as watcher:
        _settle(watcher)
        for name, write in writes:
            thread = _later(write)
            deadline = time.monotonic() + BOUND_S
            assert watcher.wait_for(name, BOUND_S)
            assert time.monotonic() < deadline
            thread.join()
        assert not watcher.fell_back


def test_a_wait_ends_at_its_timeout(watcher: InboxWatcher) -> None:
    assert watcher.wait_for("never.json", 0.3) is False
    assert watcher.wait_until(lambda: None, 0.0) is None


def test_a_missed_event_is_found_by_the_scan(watcher: InboxWatcher, inbox: Path) -> None:
    # The check depends on something no event announces: only the scan can see it.
    flag = threading.Event()
    thread = _later(flag.set, delay=0.05)
    assert watcher.wait_until(lambda: True if flag.is_set() else None, BOUND_S)
    thread.join()


def test_inotify_init_failure_falls_back_to_scanning(
    inbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_instance(cls: type[InotifyFD]) -> int:
        raise OSError(errno.EMFILE, "inotify instance limit reached")

    monkeypatch.setattr(InotifyFD, "_create_inotify_fd", classmethod(no_instance))
    with InboxWatcher(inbox, mode="inotify") as watcher:
        assert watcher.fallback_reason is FallbackReason.START_FAILED
        assert watcher.fallback_detail is not None and "instance limit" in watcher.fallback_detail
        assert watcher.observer is None
        thread = _later(lambda: write_atomically(inbox / "resp-1.json", b"{}"))
        assert watcher.wait_for("resp-1.json", BOUND_S)
        thread.join()


def test_watch_limit_at_start_falls_back_to_scanning(
    inbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def watch_limit(*args: object, **kwargs: object) -> object:
        raise OSError(errno.ENOSPC, "inotify watch limit reached")

    monkeypatch.setattr(InotifyFD, "add_callback", watch_limit)
    before = threading.active_count()
    with InboxWatcher(inbox, mode="inotify") as watcher:
        assert watcher.fallback_reason is FallbackReason.START_FAILED
        thread = _later(lambda: write_atomically(inbox / "resp-1.json", b"{}"))
        assert watcher.wait_for("resp-1.json", BOUND_S)
        thread.join()
    # The half-started observer was stopped, not leaked.
    assert threading.active_count() <= before


@pytest.mark.parametrize("mode", ["inotify", "polling"])
def test_an_observer_that_dies_mid_wait_falls_back(inbox: Path, mode: WatchMode) -> None:
    with InboxWatcher(inbox, mode=mode) as watcher:
        observer = watcher.observer
        assert observer is not None

        def die_then_write() -> None:
            observer.stop()
            observer.join()
            time.sleep(2 * watcher.scan_interval)
            write_atomically(inbox / "resp-1.json", b"{}")

        thread = _later(die_then_write)
        assert watcher.wait_for("resp-1.json", BOUND_S)
        thread.join()
        _settle(watcher)
        assert watcher.fallback_reason is FallbackReason.OBSERVER_DIED
        assert watcher.observer is None
        # Scanning from now on, still finding files.
        thread = _later(lambda: write_atomically(inbox / "resp-2.json", b"{}"))
        assert watcher.wait_for("resp-2.json", BOUND_S)
        thread.join()


def test_a_dead_inotify_reader_thread_is_noticed(inbox: Path) -> None:
    with InboxWatcher(inbox, mode="inotify") as watcher:
        observer = watcher.observer
        assert isinstance(observer, InotifyObserver)
        observer.inotify_fd.stop()
        observer.inotify_fd.join()
        thread = _later(lambda: write_atomically(inbox / "resp-1.json", b"{}"))
        assert watcher.wait_for("resp-1.json", BOUND_S)
        thread.join()
        _settle(watcher)
        assert watcher.fallback_reason is FallbackReason.OBSERVER_DIED


def test_a_kernel_event_queue_overflow_falls_back(inbox: Path) -> None:
    """A real IN_Q_OVERFLOW: the reader is held off while the kernel queue fills up."""
    with InboxWatcher(inbox, mode="inotify") as watcher:
        observer = watcher.observer
        assert isinstance(observer, InotifyObserver)
        here, there = inbox / ".x", inbox / ".y"
        here.touch()
        with observer.inotify_fd._lock:  # the reader takes this lock around every read
            # Moves (the watcher asks for creations and moves only), back and forth: two
            # events each, never two alike in a row, so the kernel cannot coalesce them.
            for _ in range(max_queued_events() // 2 + 5000):
                os.rename(here, there)
                here, there = there, here
        thread = _later(lambda: write_atomically(inbox / "resp-1.json", b"{}"))
        assert watcher.wait_for("resp-1.json", BOUND_S)
        thread.join()
        deadline = time.monotonic() + BOUND_S
        while watcher.fallback_reason is None and time.monotonic() < deadline:
            _settle(watcher)
            time.sleep(0.01)
        assert watcher.fallback_reason is FallbackReason.QUEUE_OVERFLOW
        assert watcher.observer is None


@pytest.mark.parametrize("mode", ["inotify", "polling"])
def test_a_held_inbox_is_watched_wherever_it_is_moved(tmp_path: Path, mode: WatchMode) -> None:
    inbox, decoy = tmp_path / "inbox", tmp_path / "decoy"
    inbox.mkdir()
    decoy.mkdir()
    fd = os.open(inbox, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with InboxWatcher(Path(f"/proc/self/fd/{fd}"), mode=mode) as watcher:
            moved = tmp_path / "moved"
            os.rename(inbox, moved)
            os.symlink(decoy, inbox)  # the old name leads elsewhere now
            write_atomically(decoy / "resp-2.json", b"{}")
            thread = _later(lambda: write_atomically(moved / "resp-1.json", b"{}"))
            assert watcher.wait_for("resp-1.json", BOUND_S)  # found in the held folder
            thread.join()
            assert watcher.wait_for("resp-2.json", 0.2) is False  # never in the decoy
            assert not watcher.fell_back
    finally:
        os.close(fd)


def test_the_polling_interval_is_a_parameter(inbox: Path) -> None:
    with InboxWatcher(inbox, mode="polling", polling_interval=0.01) as watcher:
        observer = watcher.observer
        assert observer is not None and observer.timeout == 0.01
        thread = _later(lambda: write_atomically(inbox / "resp-1.json", b"{}"))
        assert watcher.wait_for("resp-1.json", BOUND_S)
        thread.join()
