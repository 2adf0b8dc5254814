"""The benchmark's process sampler (`perf/process_sampler.py`) on real processes."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mailroom.orchestrator.perf.process_sampler import ProcessSampler, sample, slope

# A stand-in for bubblewrap (its command line names it, as the real one's does) that
# starts one actor process under it and waits.
PYTHON = os.path.realpath(sys.executable)
SANDBOX = (
    "import subprocess, time; "
    f"subprocess.Popen([{PYTHON!r}, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
)


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def _sandbox(bwrap: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([str(bwrap), "-c", SANDBOX])


def test_actors_under_bubblewrap_and_workers_are_told_apart(tmp_path: Path) -> None:
    bwrap = tmp_path / "bwrap"  # Python under bubblewrap's name
    bwrap.symlink_to(sys.executable)
    before = sample()
    sandboxes = [_sandbox(bwrap) for _ in range(2)]
    worker = multiprocessing.get_context("spawn").Process(target=_sleep, args=(60.0,))
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while (now := sample()).actors < before.actors + 2 or now.workers_mb <= before.workers_mb:
            assert time.monotonic() < deadline, now
            time.sleep(0.1)
        assert now.actors == before.actors + 2
        # Each Python holds megabytes: the two actors and the two stand-ins are counted.
        assert now.actors_mb > before.actors_mb + 4.0
        with ProcessSampler(interval_s=0.05) as sampler:
            while len(sampler.samples) < 2:
                time.sleep(0.05)
        assert all(s.actors == before.actors + 2 for s in sampler.samples)
    finally:
        for sandbox in sandboxes:
            for child in _children(sandbox.pid):
                child_kill(child)
            sandbox.kill()
            sandbox.wait()
        worker.kill()
        worker.join()
    assert sample().actors == before.actors


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def child_kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def test_slope_is_a_least_squares_one() -> None:
    assert slope([(1.0, 10.0), (2.0, 12.0), (3.0, 14.0)]) == pytest.approx(2.0)
    assert slope([(10.0, 100.0), (20.0, 101.0), (30.0, 105.0)]) == pytest.approx(0.25)
    assert slope([(5.0, 1.0), (5.0, 2.0)]) is None
    assert slope([]) is None
