"""The gateway section of the benchmark (`mailroom bench --only-gateway`,
`perf/gateway_bench.py`) as a real run at a tiny size: its own upstream and load generator
in processes of their own, a real Gateway with 1 and then 3 live gates, real HTTP on
127.0.0.1. Its figures exist and are finite, and every gatewayed request was metered by
the gate it went through. Never a timed assertion: the figures themselves are measured
by running the bench by hand (docs/performance.md)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

from mailroom.orchestrator.perf.gateway_bench import GATEWAY_HEADLINE, request_body

GATES = 3
PAIRS = 4
STREAMS = 2
RUN_TIMEOUT_S = 300


def _numbers(document: Any, where: str = "") -> Iterator[tuple[str, float]]:
    """Every number in `document`, with where it lies."""
    if isinstance(document, dict):
        for key, value in document.items():
            yield from _numbers(value, f"{where}.{key}")
    elif isinstance(document, list):
        for index, value in enumerate(document):
            yield from _numbers(value, f"{where}[{index}]")
    elif isinstance(document, int | float) and not isinstance(document, bool):
        yield where, float(document)


def test_both_routes_carry_the_same_bytes_streamed_or_not() -> None:
    for size in (4096, 32 * 1024):
        streamed, whole = request_body(True, size), request_body(False, size)
        assert len(streamed) == len(whole) == size
        assert json.loads(streamed)["stream"] is True and json.loads(whole)["stream"] is False


def test_a_tiny_gateway_bench_gives_finite_figures_and_meters_every_request() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from mailroom.orchestrator.cli.main import main; main()",
            *("bench", "--only-gateway", "--json"),
            *("--gateway-pairs", str(PAIRS), "--gateway-gates", str(GATES)),
            *("--gateway-streams", str(STREAMS), "--gateway-in-flight", "2"),
            *("--gateway-request-kb", "4"),
        ],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout)
    for key in GATEWAY_HEADLINE:
        value = figures[key]
        assert isinstance(value, int | float) and math.isfinite(value), (key, value)
    assert figures["gateway_live_gates"] == GATES
    details = figures["details"]["gateway"]
    for where, number in _numbers(details):
        assert math.isfinite(number), where
    sent = 0
    for name, gates in (("one_gate", 1), ("many_gates", GATES)):
        setting = details[name]
        assert setting["gates"] == gates
        for answer, pairs in (("sse", PAIRS), ("json", PAIRS), ("spaced", STREAMS)):
            ttfb = setting[answer]["ttfb"]
            assert ttfb["direct"] == ttfb["gatewayed"] == pairs
        assert setting["spaced"]["event_delay"]["gatewayed"] > 0
        metering = setting["metering"]
        # Each gate's metered request count is what the client sent through it.
        assert metering["gates"] == metering["gates_metered_exactly"] == gates
        assert metering["metered_requests"] == metering["gatewayed_requests"]
        assert metering["gatewayed_requests"] >= 2 * PAIRS + STREAMS
        assert metering["incomplete_or_failed"] == 0
        assert metering["input_tokens"] == metering["expected_input_tokens"] > 0
        assert metering["cost_usd"] > 0
        sent += metering["gatewayed_requests"]
    # Each pair was one request straight to the upstream and one through a gate; the
    # upstream refused none (the key was swapped in for every gate's token).
    served = details["upstream_served"]
    assert set(served) == {"sse", "json", "spaced"}
    assert sum(served.values()) == 2 * sent
