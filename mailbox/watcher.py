"""Wait for a named response file: watchdog events first, a reconciliation scan always.

Atomic writers arrive as moves, plain writers as creations; both wake the waiter. The
waiter re-checks the directory at least every `scan_interval`, so a missed event, a
dead observer or an overflowed event queue costs at most one interval, never a hang.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Literal

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver

WatchMode = Literal["inotify", "polling"]
DEFAULT_SCAN_INTERVAL = 0.25
POLLING_INTERVAL = 0.05


class _Wakeup(FileSystemEventHandler):
    def __init__(self, event: threading.Event) -> None:
        self._event = event

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("created", "moved", "modified", "closed"):
            self._event.set()


class InboxWatcher:
    """Watches one inbox directory for the lifetime of an episode."""

    def __init__(
        self,
        inbox: Path,
        mode: WatchMode = "inotify",
        scan_interval: float = DEFAULT_SCAN_INTERVAL,
    ) -> None:
        self.inbox = inbox
        self.mode: WatchMode = mode
        self.scan_interval = scan_interval
        self.fell_back = False
        self._event = threading.Event()
        self._observer: BaseObserver | None = None

    def start(self) -> None:
        observer: BaseObserver = (
            PollingObserver(timeout=POLLING_INTERVAL) if self.mode == "polling" else Observer()
        )
        observer.schedule(_Wakeup(self._event), str(self.inbox), recursive=False)
        try:
            observer.start()
        except OSError:
            # inotify unavailable (limits, exotic filesystem): the scan still finds files.
            self.fell_back = True
            return
        self._observer = observer

    def stop(self) -> None:
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            if observer.is_alive():
                observer.join(timeout=2.0)

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

    @property
    def observer_alive(self) -> bool:
        return self._observer is not None and self._observer.is_alive()

    def wait_for(self, name: str, timeout: float) -> bool:
        """True once `inbox/name` exists (any file type); False when `timeout` passes."""
        target = self.inbox / name
        deadline = time.monotonic() + timeout
        while True:
            # Clear before looking, so an event between the look and the wait is kept.
            self._event.clear()
            if os.path.lexists(target):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if not self.observer_alive and not self.fell_back:
                self.fell_back = True
            self._event.wait(min(remaining, self.scan_interval))
