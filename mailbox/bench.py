"""Response detection latency: how long a written response waits before it is judged.

A writer thread answers each request with an atomic write (temporary name in the
inbox, then rename), at a random moment so that no polling period is favoured; the
orchestrator side waits with the real receiver (watcher, claim, parse). Latency runs
from the rename to the judged response in hand.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import statistics
import tempfile
import threading
import time
from pathlib import Path

from .endpoint import create_endpoint
from .parser import Accepted, ActionLimits
from .receiver import Reception, ResponseReceiver
from .watcher import InboxWatcher, WatchMode

LIMITS = ActionLimits(max_chunk=5)
WRITE_JITTER_S = 0.1


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _response(request_id: str) -> bytes:
    document = {
        "schema": "mailroom.response/v1",
        "request_id": request_id,
        "decision": "act",
        "actions": [[0.0, 0.0, 0.1, 0.0, 0.0, 0.0, -1.0]] * LIMITS.max_chunk,
    }
    return json.dumps(document).encode("utf-8")


def measure_detection(
    mode: WatchMode, n: int = 200, *, seed: int = 0, base: Path | None = None
) -> dict[str, object]:
    """Detect `n` atomically written responses in `mode` (the endpoint under `base`, the
    system's temporary directory by default); figures in milliseconds."""
    rng = random.Random(seed)
    requests = [secrets.token_hex(16) for _ in range(n)]
    written_at: dict[int, float] = {}
    go = [threading.Event() for _ in range(n)]
    latencies: list[float] = []
    with tempfile.TemporaryDirectory(prefix="mailroom-bench-", dir=base) as tmp:
        endpoint = create_endpoint(Path(tmp) / "mailbox")

        def writer() -> None:
            for i, request_id in enumerate(requests, start=1):
                if not go[i - 1].wait(timeout=30):
                    return
                # Let the receiver block first, at a random phase of any polling period.
                time.sleep(rng.uniform(0.002, WRITE_JITTER_S))
                final = endpoint.response_file(i)
                temporary = final.with_name(f".{final.name}.tmp")
                temporary.write_bytes(_response(request_id))
                # Stamped before the rename: the receiver may return before this thread
                # runs again. The figure then includes the rename itself.
                written_at[i] = time.perf_counter()
                os.replace(temporary, final)

        with InboxWatcher(endpoint.held.watch_path("inbox"), mode=mode) as watcher:
            receiver = ResponseReceiver(endpoint, Path(tmp) / "private", watcher)
            thread = threading.Thread(target=writer, daemon=True)
            thread.start()
            for i, request_id in enumerate(requests, start=1):
                go[i - 1].set()
                received = receiver.receive(i, request_id, LIMITS, timeout_s=10.0)
                done = time.perf_counter()
                if not (isinstance(received, Reception) and isinstance(received.outcome, Accepted)):
                    raise RuntimeError(f"response {i} was not accepted: {received!r}")
                latencies.append((done - written_at[i]) * 1000.0)
            thread.join(timeout=10)
            fell_back = watcher.fell_back
    return {
        "mode": mode,
        "responses": n,
        "p50_ms": round(statistics.median(latencies), 3),
        "p99_ms": round(_percentile(latencies, 0.99), 3),
        "max_ms": round(max(latencies), 3),
        "mean_ms": round(statistics.fmean(latencies), 3),
        "fell_back": fell_back,
    }
