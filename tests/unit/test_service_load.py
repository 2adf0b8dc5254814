"""Admission by CPU (`campaign/capacity/service_load.py`): the arithmetic, on a clock of its own."""

from __future__ import annotations

import pytest
from mailroom.measures import percentile
from mailroom.orchestrator.campaign.capacity.service_load import (
    MAX_BUSY_SHARE,
    MIN_WAITS,
    WINDOW_S,
    ServiceLoad,
)


def test_an_idle_worker_keeps_up() -> None:
    load = ServiceLoad()
    assert load.busy_share(100.0) == 0.0
    assert load.queue_delay_p95_ms(100.0) is None
    assert load.keeps_up(100.0)
    assert load.held_back == 0


def test_busy_share_counts_the_window_only() -> None:
    load = ServiceLoad()
    # 30 s of serving in the last minute, and 30 s more before the window began.
    for second in range(0, 60, 2):
        load.served(float(second), second + 1.0, None)
    for second in range(60, 120, 2):
        load.served(float(second), second + 1.0, None)
    assert load.busy_share(120.0) == pytest.approx(30 / WINDOW_S, abs=1 / WINDOW_S)
    # A span that straddles the window's start counts for its part inside.
    straddling = ServiceLoad()
    straddling.served(50.0, 70.0, None)
    assert straddling.busy_share(120.0) == pytest.approx(10 / WINDOW_S)


def test_a_busy_serving_thread_holds_admission_back() -> None:
    load = ServiceLoad()
    load.served(0.0, (MAX_BUSY_SHARE + 0.05) * WINDOW_S, None)
    now = WINDOW_S
    assert load.busy_share(now) > MAX_BUSY_SHARE
    assert not load.keeps_up(now)
    assert load.held_back == 1
    # A minute later the span has left the window.
    assert load.keeps_up(now + WINDOW_S + 1)


def test_long_queueing_delays_hold_admission_back_once_there_are_enough() -> None:
    load = ServiceLoad()
    # Short serves (the thread is mostly idle), but each response waited 1.5 s.
    for i in range(MIN_WAITS - 1):
        t = 10.0 + i
        load.served(t, t + 0.01, t - 1.5)
    assert load.queue_delay_p95_ms(40.0) is None  # too few to say
    assert load.keeps_up(40.0)
    load.served(40.0, 40.01, 38.5)
    assert load.queue_delay_p95_ms(41.0) == pytest.approx(1500.0)
    assert not load.keeps_up(41.0)


def test_the_p95_is_a_nearest_rank_one() -> None:
    load = ServiceLoad()
    waits = [0.001] * 95 + [2.0] * 5  # 5% waited 2 s: the p95 is still short
    for i, wait in enumerate(waits):
        t = 1.0 + i * 0.1
        load.served(t, t + 0.001, t - wait)
    p95 = load.queue_delay_p95_ms(12.0)
    assert p95 == pytest.approx(percentile([w * 1000 for w in waits], 0.95))
    assert p95 is not None and p95 < 2000.0
    assert load.keeps_up(12.0)
