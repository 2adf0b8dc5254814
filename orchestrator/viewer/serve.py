"""`mailroom view --serve`: the site on localhost, rebuilt while its run goes on."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from mailroom.orchestrator.records.run_directory import RunDirectory
from mailroom.orchestrator.viewer.pages import CSP
from mailroom.orchestrator.viewer.site import build_site

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
    """The site served on `HOST:port` (0: any free port), rebuilt every `REBUILD_S`
    while a launch holds the run, and once more when it stops."""

    def __init__(self, run_dir: Path, out: Path, port: int) -> None:
        self.run_dir, self.out = run_dir, out
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
            live = RunDirectory(self.run_dir).in_use()
            if live or was_live:
                build_site(self.run_dir, self.out)
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
