"""Response detection latency: how long a written response waits before it is judged.

A writer process (actors are processes, never threads of the orchestrator) answers each
request with an atomic write (temporary name in the inbox, then rename), at a random
moment so that no polling period is favoured; the orchestrator side waits with the
real receiver (watcher, claim, parse). Detection runs from the rename to the moment the
waiting thread has the response's name; `judged` runs on to the claimed, parsed and
validated response in hand (`time.perf_counter` is CLOCK_MONOTONIC, shared by both
processes).
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import os
import random
import secrets
import statistics
import tempfile
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path

from mailroom.mailbox.endpoint import create_endpoint
from mailroom.mailbox.parser import Accepted, ActionLimits
from mailroom.mailbox.receiver import Reception, ResponseReceiver
from mailroom.mailbox.watcher import InboxWatcher, WatchMode
from mailroom.measures import percentile

LIMITS = ActionLimits(max_chunk=5)
WRITE_JITTER_S = 0.1


# The benchmarks' one action (a slow lift, gripper open): the mailbox run and the naive
# loop it is compared with must execute the same controls.
BENCH_ACTION: tuple[float, ...] = (0.0, 0.0, 0.05, 0.0, 0.0, 0.0, -1.0)


def milliseconds(seconds: Sequence[float]) -> dict[str, float | None]:
    """Median and p95 of durations in seconds, in milliseconds (None for no samples)."""
    if not seconds:
        return {"p50_ms": None, "p95_ms": None}
    return {
        "p50_ms": round(percentile(seconds, 0.5) * 1000, 3),
        "p95_ms": round(percentile(seconds, 0.95) * 1000, 3),
    }


def act_response(request_id: str, chunk: int) -> bytes:
    """A valid response that repeats `BENCH_ACTION` `chunk` times."""
    document = {
        "schema": "mailroom.response/v1",
        "request_id": request_id,
        "decision": "act",
        "actions": [list(BENCH_ACTION)] * chunk,
    }
    return json.dumps(document).encode("utf-8")


def write_response(final: Path, body: bytes) -> float:
    """An actor's atomic write: a temporary name, then the rename. Returns when the
    rename began (`time.perf_counter`)."""
    temporary = final.with_name(f".{final.name}.tmp")
    temporary.write_bytes(body)
    renamed_at = time.perf_counter()
    os.replace(temporary, final)
    return renamed_at


def _writer(conn: Connection, inbox: str, seed: int) -> None:
    """Child process: for each (sequence, request id) received, wait a random moment,
    write the response atomically, and send back when its rename began."""
    rng = random.Random(seed)
    while True:
        job = conn.recv()
        if job is None:
            return
        sequence, request_id = job
        # Let the receiver block first, at a random phase of any polling period.
        time.sleep(rng.uniform(0.002, WRITE_JITTER_S))
        final = Path(inbox) / f"resp-{sequence}.json"
        conn.send(write_response(final, act_response(request_id, LIMITS.max_chunk)))


def measure_detection(
    mode: WatchMode, n: int = 200, *, seed: int = 0, base: Path | None = None
) -> dict[str, object]:
    """Detect `n` atomically written responses in `mode` (the endpoint under `base`, the
    system's temporary directory by default); figures in milliseconds."""
    latencies: list[float] = []  # rename -> the waiter holds the file's name
    judged: list[float] = []  # rename -> claimed, parsed and validated
    with tempfile.TemporaryDirectory(prefix="mailroom-bench-", dir=base) as tmp:
        endpoint = create_endpoint(Path(tmp) / "mailbox")
        spawn = mp.get_context("spawn")
        ours, theirs = spawn.Pipe()
        writer = spawn.Process(
            target=_writer, args=(theirs, str(endpoint.root / "inbox"), seed), daemon=True
        )
        writer.start()
        try:
            with InboxWatcher(endpoint.held.watch_path("inbox"), mode=mode) as watcher:
                receiver = ResponseReceiver(endpoint, Path(tmp) / "private", watcher)
                for i in range(1, n + 1):
                    request_id = secrets.token_hex(16)
                    ours.send((i, request_id))
                    received = receiver.receive(i, request_id, LIMITS, timeout_s=10.0)
                    done = time.perf_counter()
                    accepted = isinstance(received, Reception) and isinstance(
                        received.outcome, Accepted
                    )
                    if not accepted:
                        raise RuntimeError(f"response {i} was not accepted: {received!r}")
                    renamed_at = float(ours.recv())
                    latencies.append((watcher.found_at - renamed_at) * 1000.0)
                    judged.append((done - renamed_at) * 1000.0)
                fell_back = watcher.fell_back
        finally:
            with contextlib.suppress(OSError):  # a writer already gone
                ours.send(None)
            writer.join(timeout=10)
            if writer.is_alive():
                writer.kill()
    return {
        "mode": mode,
        "responses": n,
        "p50_ms": round(statistics.median(latencies), 3),
        "p99_ms": round(percentile(latencies, 0.99), 3),
        "max_ms": round(max(latencies), 3),
        "mean_ms": round(statistics.fmean(latencies), 3),
        "judged_p50_ms": round(statistics.median(judged), 3),
        "judged_p99_ms": round(percentile(judged, 0.99), 3),
        "fell_back": fell_back,
    }
