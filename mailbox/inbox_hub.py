"""One waiting mechanism for every inbox of a process.

A worker that serves many live episodes must not run a thread (or a poll loop) per
inbox. The hub holds one inotify instance with one reader thread (watchdog's
`InotifyFD`) and one event: an arrival in any watched inbox notes the arrival on that
inbox's `InboxWatcher` and sets the event, and the worker, waiting on `wait`, then asks
the woken watchers (`InboxWatcher.poll`). A queue overflow reaches every watcher, which
falls back to scanning; a reader thread that died is seen by each watcher's next poll.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from watchdog.observers.inotify_c import (
    CallbackId,
    InotifyConstants,
    InotifyEvent,
    InotifyFD,
    Mask,
    WatchDescriptor,
)

if TYPE_CHECKING:
    from .watcher import InboxWatcher

# Only arrivals are asked of the kernel; IN_ONLYDIR: a held inbox is a directory.
_MASK = Mask(
    InotifyConstants.IN_CREATE | InotifyConstants.IN_MOVED_TO | InotifyConstants.IN_ONLYDIR
)


@dataclass(frozen=True)
class HubWatch:
    """One inbox's registration: its watch descriptor and callback id."""

    wd: WatchDescriptor
    callback_id: CallbackId


class _WatcherCallback:
    """watchdog's `WatchCallback` for one inbox: hands arrivals to its watcher."""

    def __init__(self, watcher: InboxWatcher, wake: threading.Event) -> None:
        self.watcher = watcher
        self.wake = wake

    def on_event(self, event: InotifyEvent) -> None:
        if (event.is_create or event.is_moved_to) and self.watcher.note_arrival(
            os.fsdecode(event.name)
        ):
            self.wake.set()

    def on_watch_deleted(self, wd: WatchDescriptor) -> None:
        self.wake.set()  # the inbox is gone: its next poll says how

    def on_queue_overflow(self) -> None:
        self.watcher.note_overflow()
        self.wake.set()


class InboxHub:
    def __init__(self) -> None:
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._fd: InotifyFD | None = None
        self._next_id = 0

    @property
    def alive(self) -> bool:
        return self._fd is not None and self._fd.is_alive()

    def _reader(self) -> InotifyFD:
        if self._fd is None:
            fd = InotifyFD()
            fd.daemon = True
            fd.start()
            self._fd = fd
        return self._fd

    def watch(self, inbox: Path, watcher: InboxWatcher) -> HubWatch:
        """Watch `inbox` (a held directory's magic link is followed once) for `watcher`."""
        with self._lock:
            reader = self._reader()
            self._next_id += 1
            callback_id = CallbackId(self._next_id)
        wd = reader.add_callback(
            os.fsencode(str(inbox)), _MASK, _WatcherCallback(watcher, self._wake), callback_id
        )
        return HubWatch(wd, callback_id)

    def unwatch(self, watch: HubWatch) -> None:
        fd = self._fd
        if fd is not None:
            fd.remove_callbacks([(watch.wd, watch.callback_id)])

    def wake(self) -> None:
        """Cut the current `wait` short (work arrived from elsewhere)."""
        self._wake.set()

    def wait(self, timeout_s: float) -> bool:
        """Sleep until an arrival in any inbox, a `wake`, or `timeout_s`; True if woken."""
        woken = self._wake.wait(max(0.0, timeout_s))
        self._wake.clear()
        return woken

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            fd.stop()
            if fd.is_alive() and fd is not threading.current_thread():
                fd.join(timeout=2.0)
