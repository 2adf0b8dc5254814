"""`mailroom view --serve`: the site on localhost, rebuilt while its runs go on (one run's
site, or the comparison site of several)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from mailroom.orchestrator.records.run_directory import RunDirectory
from mailroom.orchestrator.viewer.markup import CSP

REBUILD_S = 2.0
HOST = "127.0.0.1"


class _Handler(SimpleHTTPRequestHandler):
    """Serves the site's folder only, never caches, and states the pages' policy."""

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return  # quiet: the command prints where it serves


class LiveSite:
    """The site served on `HOST:port` (0: any free port), rebuilt by `build` every
    `REBUILD_S` while a launch holds any of `run_dirs`, and once more when they stop."""

    def __init__(
        self, run_dirs: Sequence[Path], out: Path, port: int, build: Callable[[], object]
    ) -> None:
        self.run_dirs, self.out, self.build = list(run_dirs), out, build
        handler = functools.partial(_Handler, directory=str(out))
        self.server = ThreadingHTTPServer((HOST, port), handler)
        self._stop = threading.Event()
        self._rebuilder = threading.Thread(target=self._rebuild, name="rebuild", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server.server_address[1]}/index.html"

    def _rebuild(self) -> None:
        was_live = True
        while not self._stop.wait(REBUILD_S):
            live = any(RunDirectory(run_dir).in_use() for run_dir in self.run_dirs)
            if live or was_live:
                self.build()
            was_live = live

    def serve_forever(self, on_ready: Callable[[str], None] = lambda _: None) -> None:
        self._rebuilder.start()
        on_ready(self.url)
        try:
            self.server.serve_forever(poll_interval=0.2)
        finally:
            self._stop.set()
            self.server.server_close()

    def shutdown(self) -> None:
        self.server.shutdown()
