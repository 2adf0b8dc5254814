"""The benchmark's process sampler (`perf/process_sampler.py`) on real processes."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import time

import pytest
from mailroom.orchestrator.perf.process_sampler import ProcessSampler, sample, slope

MARKER = "scripted_diagnostic/actor.py"


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def test_actors_and_workers_are_told_apart_among_descendants() -> None:
    before = sample(MARKER)
    # Two "actors" (a command line naming the actor program) and one worker.
    actors = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", f"/x/{MARKER}"])
        for _ in range(2)
    ]
    worker = multiprocessing.get_context("spawn").Process(target=_sleep, args=(60.0,))
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while (now := sample(MARKER)).actors < 2 or now.workers_mb <= before.workers_mb:
            assert time.monotonic() < deadline, now
            time.sleep(0.1)
        assert now.actors == before.actors + 2
        assert now.actors_mb > before.actors_mb + 1.0  # each Python holds megabytes
        with ProcessSampler(MARKER, interval_s=0.05) as sampler:
            while len(sampler.samples) < 2:
                time.sleep(0.05)
        assert all(s.actors == 2 for s in sampler.samples)
    finally:
        for actor in actors:
            actor.kill()
            actor.wait()
        worker.kill()
        worker.join()
    assert sample(MARKER).actors == before.actors


def test_slope_is_a_least_squares_one() -> None:
    assert slope([(1.0, 10.0), (2.0, 12.0), (3.0, 14.0)]) == pytest.approx(2.0)
    assert slope([(10.0, 100.0), (20.0, 101.0), (30.0, 105.0)]) == pytest.approx(0.25)
    assert slope([(5.0, 1.0), (5.0, 2.0)]) is None
    assert slope([]) is None
