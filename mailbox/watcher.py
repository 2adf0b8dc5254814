"""Wait for files in one inbox: watchdog events first, a reconciliation scan always.

Atomic writers arrive as moves, plain writers as creations; both wake the waiter. The
waiter re-checks the directory at least every `scan_interval`, so a missed event costs
at most one interval. An observer that cannot start, whose threads die, or whose kernel
event queue overflows is detected: the watcher records why, stops it, and falls back
to scanning every `FALLBACK_SCAN_INTERVAL`. It never hangs.

A watcher given an `InboxHub` starts no thread of its own: the hub's one inotify
instance and reader thread serve every inbox of the process, and a caller serving
many inboxes waits on the hub, then asks each woken watcher with `poll`.

Each watcher notes when a response name first arrived (`arrival_of`): the time an
answer waited before it was served is measured from there.

Given the path of a held directory (`EndpointDirs.watch_path`, a `/proc/self/fd` magic
link), the observer watches that directory wherever the actor moves it, and never
whatever the actor put under its old name. The polling observer never follows a
symlink inside the inbox either.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal, TypeVar

from watchdog.events import (
    DirCreatedEvent,
    DirMovedEvent,
    FileCreatedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers.api import BaseObserver
from watchdog.observers.inotify import InotifyEmitter
from watchdog.observers.inotify_c import InotifyEvent, InotifyFD
from watchdog.observers.polling import PollingObserverVFS

if TYPE_CHECKING:
    from .inbox_hub import HubWatch, InboxHub

WatchMode = Literal["inotify", "polling"]
DEFAULT_SCAN_INTERVAL = 0.25
POLLING_INTERVAL = 0.05
FALLBACK_SCAN_INTERVAL = 0.05
WAKE_EVENTS = frozenset({"created", "moved"})
# Arrival times kept per watcher between two `forget_arrivals` (names beyond are ignored).
MAX_ARRIVALS = 64
# Only these are asked of the kernel (inotify: IN_CREATE and IN_MOVE): writes, closes
# and the claims' own unlinks wake no observer thread.
WAKE_EVENT_TYPES: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    FileMovedEvent,
    DirCreatedEvent,
    DirMovedEvent,
]
T = TypeVar("T")


class FallbackReason(StrEnum):
    START_FAILED = "observer_start_failed"
    OBSERVER_DIED = "observer_died"
    QUEUE_OVERFLOW = "event_queue_overflow"


class _Wakeup(FileSystemEventHandler):
    def __init__(self, event: threading.Event) -> None:
        self._event = event

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in WAKE_EVENTS:
            self._event.set()


class _WakingInotifyFD(InotifyFD):
    """watchdog's inotify reader, reporting a kernel queue overflow (events were lost),
    and waking the waiter itself the moment the kernel reports an arrival.

    watchdog hands each event on through two more threads (emitter, then observer)
    before a handler runs; each hand-off waits for the interpreter lock. Waking from
    the reader thread saves both (the handler still runs and wakes it again).
    """

    def __init__(
        self, on_overflow: Callable[[], None], on_arrival: Callable[[str], object]
    ) -> None:
        super().__init__()
        self._on_overflow = on_overflow
        self._on_arrival = on_arrival

    def handle_event(self, event: InotifyEvent) -> None:
        if event.is_queue_overflow:
            self._on_overflow()
        elif event.is_create or event.is_moved_to:
            self._on_arrival(os.fsdecode(event.name))
        super().handle_event(event)


class InotifyObserver(BaseObserver):
    """watchdog's inotify observer with its own reader thread, which it exposes."""

    def __init__(
        self, on_overflow: Callable[[], None], on_arrival: Callable[[str], object]
    ) -> None:
        self.inotify_fd = _WakingInotifyFD(on_overflow, on_arrival)
        self.inotify_fd.start()
        super().__init__(InotifyEmitter, inotify_fd=self.inotify_fd)

    def on_thread_stop(self) -> None:
        super().on_thread_stop()
        self.inotify_fd.stop()
        if self.inotify_fd.is_alive() and self.inotify_fd is not threading.current_thread():
            self.inotify_fd.join(timeout=2.0)


def _threads_alive(observer: BaseObserver) -> bool:
    if not observer.is_alive() or not all(e.is_alive() for e in observer.emitters):
        return False
    return not isinstance(observer, InotifyObserver) or observer.inotify_fd.is_alive()


def _stop(observer: BaseObserver) -> None:
    with contextlib.suppress(Exception):
        observer.stop()
    if observer.is_alive() and observer is not threading.current_thread():
        observer.join(timeout=2.0)


def _stat_without_following(top: str) -> Callable[[str], os.stat_result]:
    """The polling snapshot's stat: `top` itself as given, everything in it by lstat."""

    def stat(path: str) -> os.stat_result:
        return os.stat(path) if path == top else os.lstat(path)

    return stat


class InboxWatcher:
    """Watches one inbox directory for the lifetime of an episode.

    `inbox` may be a held directory's `/proc/self/fd/<n>` path: it is then followed once,
    to the held directory, and nothing below it is ever followed.
    """

    def __init__(
        self,
        inbox: Path,
        mode: WatchMode = "inotify",
        scan_interval: float = DEFAULT_SCAN_INTERVAL,
        polling_interval: float = POLLING_INTERVAL,
        hub: InboxHub | None = None,
        counts: Callable[[str], bool] | None = None,
    ) -> None:
        self.inbox = inbox
        # Which arrivals count (wake a hub's caller, have their time kept): by default
        # every name. An actor's other files must not jump the queue or fill the book.
        self.counts = counts
        self.mode: WatchMode = mode
        self.hub = hub
        self._hub_watch: HubWatch | None = None
        self._arrivals: dict[str, float] = {}
        self._arrivals_lock = threading.Lock()
        # An arrival that no look has followed yet (a hub's caller polls these first).
        self._unseen = threading.Event()
        self.scan_interval = scan_interval
        self.polling_interval = polling_interval
        self.fallback_reason: FallbackReason | None = None
        self.fallback_detail: str | None = None
        self._event = threading.Event()
        self._overflowed = threading.Event()
        self._observer: BaseObserver | None = None
        # When the last wait found what it looked for (`time.perf_counter`): lets a
        # benchmark split detection from what follows it.
        self.found_at = 0.0
        self.found_monotonic = 0.0

    @property
    def fell_back(self) -> bool:
        return self.fallback_reason is not None

    @property
    def observer(self) -> BaseObserver | None:
        return self._observer

    def note_overflow(self) -> None:
        # Called on watchdog's reader thread: flag it, the waiter does the rest.
        self._overflowed.set()
        self._event.set()

    def note_arrival(self, name: str) -> bool:
        """A name was created or moved into the inbox (called on the reader thread);
        True if it counts."""
        if self.counts is not None and not self.counts(name):
            return False
        now = time.monotonic()
        with self._arrivals_lock:
            if name not in self._arrivals and len(self._arrivals) < MAX_ARRIVALS:
                self._arrivals[name] = now
        self._unseen.set()
        self._event.set()
        return True

    def arrival_of(self, name: str) -> float | None:
        """When `name` first arrived since `forget_arrivals` (monotonic), if an event said."""
        with self._arrivals_lock:
            return self._arrivals.get(name)

    def unseen_since(self) -> float | None:
        """When the earliest arrival came, if something arrived since the last look
        (None otherwise): a hub's caller looks at these inboxes, in this order."""
        if not self._unseen.is_set():
            return None
        with self._arrivals_lock:
            return min(self._arrivals.values(), default=time.monotonic())

    def forget_arrivals(self) -> None:
        with self._arrivals_lock:
            self._arrivals.clear()

    def _new_observer(self) -> BaseObserver:
        if self.mode == "polling":
            return PollingObserverVFS(
                stat=_stat_without_following(str(self.inbox)),
                listdir=os.scandir,
                polling_interval=self.polling_interval,
            )
        return InotifyObserver(self.note_overflow, self.note_arrival)

    def _fall_back(self, reason: FallbackReason, detail: str) -> None:
        if self.fallback_reason is None:
            self.fallback_reason, self.fallback_detail = reason, detail[:500]

    def start(self) -> None:
        if self.hub is not None:
            self._start_on_hub(self.hub)
            return
        observer: BaseObserver | None = None
        try:
            observer = self._new_observer()
            # Following only the watched path itself: a held directory's magic link.
            observer.schedule(
                _Wakeup(self._event),
                str(self.inbox),
                recursive=False,
                follow_symlink=True,
                event_filter=WAKE_EVENT_TYPES,
            )
            observer.start()
        except Exception as exc:  # any failure to watch: the scan still finds files
            self._fall_back(FallbackReason.START_FAILED, f"{type(exc).__name__}: {exc}")
            if observer is not None:
                _stop(observer)
            return
        self._observer = observer

    def _start_on_hub(self, hub: InboxHub) -> None:
        if self.mode == "polling":
            return  # scanned at the polling interval by whoever polls; no thread at all
        try:
            self._hub_watch = hub.watch(self.inbox, self)
        except Exception as exc:  # any failure to watch: the scan still finds files
            self._fall_back(FallbackReason.START_FAILED, f"{type(exc).__name__}: {exc}")

    def stop(self) -> None:
        watch, self._hub_watch = self._hub_watch, None
        if watch is not None and self.hub is not None:
            self.hub.unwatch(watch)
        observer, self._observer = self._observer, None
        if observer is not None:
            _stop(observer)

    def __enter__(self) -> InboxWatcher:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _check_hub(self) -> None:
        if self._hub_watch is None or self.hub is None:
            return
        if self._overflowed.is_set():
            self._fall_back(FallbackReason.QUEUE_OVERFLOW, "the kernel dropped inotify events")
        elif not self.hub.alive:
            self._fall_back(FallbackReason.OBSERVER_DIED, "the hub's reader thread is not alive")
        else:
            return
        watch, self._hub_watch = self._hub_watch, None
        self.hub.unwatch(watch)

    @property
    def recheck_interval(self) -> float:
        """How often the inbox must be looked at when no event says so."""
        if self.fell_back:
            return FALLBACK_SCAN_INTERVAL
        if self.hub is not None and self.mode == "polling":
            return self.polling_interval
        return self.scan_interval

    def poll(self, check: Callable[[], T | None]) -> T | None:
        """One look, without waiting: the result of `check`, None if nothing is there."""
        self._event.clear()
        self._unseen.clear()
        self._check_observer()
        found = check()
        if found is not None:
            self.found_at = time.perf_counter()
            self.found_monotonic = time.monotonic()
        return found

    def _check_observer(self) -> None:
        self._check_hub()
        observer = self._observer
        if observer is None:
            return
        if self._overflowed.is_set():
            self._fall_back(FallbackReason.QUEUE_OVERFLOW, "the kernel dropped inotify events")
        elif not _threads_alive(observer):
            self._fall_back(FallbackReason.OBSERVER_DIED, "an observer thread is no longer alive")
        else:
            return
        self._observer = None
        _stop(observer)

    def wait_until(self, check: Callable[[], T | None], timeout: float) -> T | None:
        """The first non-None result of `check`, or None once `timeout` passes.

        `check` runs at once, after every wake-up and at least every scan interval.
        """
        deadline = time.monotonic() + timeout
        while True:
            # `poll` clears the event before it looks: one between the look and the
            # wait is kept.
            found = self.poll(check)
            if found is not None:
                return found
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self._event.wait(min(remaining, self.recheck_interval))

    def wait_for(self, name: str, timeout: float) -> bool:
        """True once `inbox/name` exists (any file type); False when `timeout` passes."""
        target = self.inbox / name
        return self.wait_until(lambda: True if os.path.lexists(target) else None, timeout) is True
