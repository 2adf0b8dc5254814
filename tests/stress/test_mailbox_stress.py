"""10,000 responses through each watcher mode: none missed, none claimed twice.

Ten endpoints run at once, each with its own real watcher and receiver, and a writer
thread that answers each request atomically (temporary name, then rename) at a
slightly random moment, so that responses land both before and during the wait. Every
sequence must be claimed exactly once, byte for byte, and no response may be left in
any inbox. Elapsed times are printed, never asserted.
"""

from __future__ import annotations

import json
import os
import queue
import random
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from mailbox_cases import LIMITS
from mailroom.mailbox.endpoint import create_endpoint
from mailroom.mailbox.parser import Accepted
from mailroom.mailbox.receiver import Reception, ResponseReceiver
from mailroom.mailbox.watcher import InboxWatcher, WatchMode

ENDPOINTS = 10
RESPONSES = 1000  # per endpoint
POLLING_INTERVAL = 0.01
BOUND_S = 60.0


@dataclass(frozen=True)
class Run:
    claimed: list[int]
    mismatched: list[int]
    left_in_inbox: list[str]
    late: int
    evidence: list[str]
    fell_back: bool


def _answer(sequence: int, request_id: str) -> bytes:
    value = round(sequence / (RESPONSES + 1), 6)  # a different document per sequence
    document = {
        "schema": "mailroom.response/v1",
        "request_id": request_id,
        "decision": "act",
        "actions": [[value, 0, 0, 0, 0, 0, -1]],
    }
    return json.dumps(document).encode()


def _one_endpoint(root: Path, index: int, mode: WatchMode) -> Run:
    endpoint = create_endpoint(root / "mailbox")
    private = root / "private" / str(index)
    request_ids = [secrets.token_hex(16) for _ in range(RESPONSES)]
    written: dict[int, bytes] = {}
    asked: queue.Queue[int] = queue.Queue()
    rng = random.Random(index)

    def writer() -> None:
        for _ in range(RESPONSES):
            sequence = asked.get(timeout=BOUND_S)
            if rng.random() < 0.3:
                time.sleep(0.001)  # now and then, after the receiver has started waiting
            data = _answer(sequence, request_ids[sequence - 1])
            final = endpoint.response_file(sequence)
            temporary = final.with_name(f".{final.name}.{index}.tmp")
            temporary.write_bytes(data)
            written[sequence] = data
            os.replace(temporary, final)

    claimed: list[int] = []
    mismatched: list[int] = []
    watch_path = endpoint.held.watch_path("inbox")
    with InboxWatcher(watch_path, mode=mode, polling_interval=POLLING_INTERVAL) as watcher:
        receiver = ResponseReceiver(endpoint, private, watcher)
        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        for sequence in range(1, RESPONSES + 1):
            asked.put(sequence)
            received = receiver.receive(sequence, request_ids[sequence - 1], LIMITS, BOUND_S)
            if not (isinstance(received, Reception) and isinstance(received.outcome, Accepted)):
                raise AssertionError(f"endpoint {index}, sequence {sequence}: {received!r}")
            assert received.claimed is not None and received.name is not None
            claimed.append(int(received.name[len("resp-") : -len(".json")]))
            if received.claimed.evidence.read_bytes() != written[sequence]:
                mismatched.append(sequence)
        thread.join(timeout=BOUND_S)
        late = receiver.sweep_late()
        fell_back = watcher.fell_back
    return Run(
        claimed=claimed,
        mismatched=mismatched,
        left_in_inbox=sorted(os.listdir(endpoint.inbox)),
        late=len(late),
        evidence=sorted(os.listdir(private)),
        fell_back=fell_back,
    )


@pytest.mark.parametrize("mode", ["inotify", "polling"])
def test_ten_thousand_responses(tmp_path: Path, mode: WatchMode) -> None:
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=ENDPOINTS) as pool:
        runs = list(pool.map(lambda i: _one_endpoint(tmp_path, i, mode), range(ENDPOINTS)))
    elapsed = time.perf_counter() - started
    total = sum(len(r.claimed) for r in runs)
    print(
        f"\n{mode}: {total} responses over {ENDPOINTS} endpoints in {elapsed:.1f} s "
        f"({total / elapsed:.0f}/s)"
    )
    expected = list(range(1, RESPONSES + 1))
    every_name = sorted(f"resp-{i}.json" for i in expected)
    for run in runs:
        assert run.claimed == expected  # each exactly once, in order
        assert run.mismatched == []  # byte for byte
        assert run.left_in_inbox == [] and run.late == 0  # nothing left, nothing twice
        assert run.evidence == every_name  # no strays, no duplicates
        assert not run.fell_back
