"""Pure arithmetic of the benchmark's throughput figure (no simulator involved)."""

from __future__ import annotations

import pytest
from mailroom.orchestrator.perf.throughput import steady_rate


def test_one_worker_counts_the_episodes_after_its_first() -> None:
    # finishes at 10 s (start-up included), then one every 5 s
    finishes = [10.0, 15.0, 20.0, 25.0, 30.0]
    assert steady_rate(finishes, workers=1) == pytest.approx(4 * 3600 / 20.0)


def test_two_workers_leave_out_start_up_and_the_tail() -> None:
    # each worker: first finish after start-up, then every 10 s; worker B ends early
    a = [12.0, 22.0, 32.0, 42.0, 52.0]
    b = [13.0, 23.0, 33.0, 43.0]
    rate = steady_rate(a + b, workers=2)
    # window from the 2nd finish (13 s) to the 8th (43 s): 6 episodes in 30 s
    assert rate == pytest.approx(6 * 3600 / 30.0)
    assert rate == pytest.approx(2 * 3600 / 10.0)  # two workers at one per 10 s each


def test_too_few_finishes_give_no_figure() -> None:
    assert steady_rate([5.0, 6.0], workers=2) is None
    assert steady_rate([5.0], workers=1) is None
    assert steady_rate([5.0, 5.0], workers=1) is None
