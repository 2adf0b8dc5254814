"""The known fault's shape, checked on real processes: a real bubblewrap sandbox whose
outer process is killed before the inner one has its parent-death signal (here: never,
as it is started without `--die-with-parent`) leaves exactly what the soak test tolerates;
a plain process, or a sandbox whose outer bubblewrap lives, is not that fault."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from known_faults import (
    BWRAP_SETUP_SURVIVOR,
    KnownFault,
    bwrap_setup_survivors,
    end_known_survivors,
    read_process,
    report_known_fault,
)

BWRAP = shutil.which("bwrap") or "/usr/bin/bwrap"


def _with_marker(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return sorted(found)


def _wait_for(condition: Callable[[], bool], bound_s: float = 30.0) -> None:
    deadline = time.monotonic() + bound_s
    while not condition():
        assert time.monotonic() < deadline, "not within the bound"
        time.sleep(0.02)


@pytest.fixture
def marker() -> Iterator[str]:
    """A string in the command lines of this test's processes; they are ended at the end."""
    name = f"known-fault-{uuid.uuid4().hex}"
    yield name
    for pid in _with_marker(name):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _sandbox(marker: str) -> subprocess.Popen[bytes]:
    """A bubblewrap sandbox as the actors' (own user and pid namespaces, a new session)
    running a shell with a child, without a parent-death signal."""
    proc = subprocess.Popen(
        [
            BWRAP,
            "--unshare-all",
            "--unshare-user",
            "--ro-bind",
            "/",
            "/",
            "--new-session",
            "/bin/sh",
            "-c",
            f"sleep 600; : {marker}",
        ],
    )
    # outer bubblewrap, inner bubblewrap, the shell and its sleep
    _wait_for(lambda: len(_with_marker(marker)) >= 3)
    return proc


def test_an_orphaned_inner_bubblewrap_is_the_known_fault(marker: str) -> None:
    outer = _sandbox(marker)
    outer.kill()
    outer.wait()
    left = _with_marker(marker)
    roots = bwrap_setup_survivors(left)
    assert roots is not None and len(roots) == 1, [read_process(p) for p in left]
    inner = read_process(roots[0])
    assert inner is not None and inner.comm == "bwrap" and inner.nspid[-1] == 1
    assert end_known_survivors(roots) == []
    _wait_for(lambda: _with_marker(marker) == [])
    with pytest.warns(KnownFault, match="bwrap-setup-survivor"):
        line = report_known_fault(BWRAP_SETUP_SURVIVOR, "after kill 1: ...")
    assert line.startswith("KNOWN FAULT bwrap-setup-survivor (issue 33)")


def test_a_sandbox_whose_outer_bubblewrap_lives_is_not_the_known_fault(marker: str) -> None:
    outer = _sandbox(marker)
    try:
        assert bwrap_setup_survivors(_with_marker(marker)) is None
    finally:
        outer.kill()
        outer.wait()


def test_a_process_outside_any_sandbox_is_not_the_known_fault(marker: str) -> None:
    plain = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", marker])
    try:
        _wait_for(lambda: _with_marker(marker) != [])
        assert bwrap_setup_survivors(_with_marker(marker)) is None
        assert bwrap_setup_survivors([]) is None
    finally:
        plain.kill()
        plain.wait()


def test_an_orphaned_sandbox_beside_another_survivor_is_not_the_known_fault(
    marker: str,
) -> None:
    """Every survivor must have the shape: one that does not fails the whole set."""
    outer = _sandbox(marker)
    outer.kill()
    outer.wait()
    plain = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", marker])
    try:
        _wait_for(lambda: plain.pid in _with_marker(marker))
        assert bwrap_setup_survivors(_with_marker(marker)) is None
    finally:
        plain.kill()
        plain.wait()
