"""Pages of a site `mailroom view --serve` serves, read while a launch holds its run: the
server rebuilds the site, whose index reloads itself until the launch ends."""

from __future__ import annotations

import contextlib
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator

from conftest import mailroom_exe, served_url

RELOADS = 'http-equiv="refresh"'


@contextlib.contextmanager
def served_view(*args: str) -> Iterator[str]:
    """`mailroom view ARGS --serve --port 0` for the length of the block: the address of
    the index it serves."""
    server = subprocess.Popen(
        [mailroom_exe(), "view", *args, "--serve", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield served_url(server)
    finally:
        server.terminate()
        server.wait(timeout=10)


def page_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        text: str = response.read().decode()
    return text


def rebuilt_page(url: str, ready: Callable[[str], bool], what: str, within_s: float = 30.0) -> str:
    """The page at `url` once `ready(page)` holds, read every 0.3 s; `what` is said if it
    does not hold within `within_s`."""
    deadline = time.monotonic() + within_s
    while True:
        now = page_text(url)
        if ready(now):
            return now
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


def settled_page(url: str, now: str, within_s: float = 30.0) -> str:
    """The page at `url` (`now`: as last read) once it no longer reloads itself: rebuilt
    once more when the launch ended."""
    deadline = time.monotonic() + within_s
    while RELOADS in now:
        assert time.monotonic() < deadline
        time.sleep(0.3)
        now = page_text(url)
    return now
