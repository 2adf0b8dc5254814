"""The flood section's flooder (`perf/flood_isolation.py`) on real files, watched by the
project's real inotify hub, and the benchmarks' own actors on an endpoint's real folders.
The flooder floods the first live endpoint until that episode closes, and only it; its
names reach the watcher without ever counting as responses.
The section's figures come from `mailroom bench --only-flood` (docs/performance.md)."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from mailroom.mailbox.inbox_hub import InboxHub
from mailroom.mailbox.parser import Accepted, ActionLimits, parse_response
from mailroom.mailbox.receiver import response_sequence
from mailroom.mailbox.watcher import InboxWatcher
from mailroom.orchestrator.perf.flood_isolation import flood
from mailroom.orchestrator.perf.instant_actor import read_stamps

WAIT_S = 60.0


def _endpoint(mailbox: Path, name: str) -> Path:
    endpoint = mailbox / name
    (endpoint / "inbox").mkdir(parents=True)
    (endpoint / "outbox").mkdir()
    return endpoint


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_the_flooder_floods_one_live_endpoint_until_its_episode_closes(tmp_path: Path) -> None:
    mailbox, log = tmp_path / "mailbox", tmp_path / "flood.json"
    first, second = _endpoint(mailbox, "e1"), _endpoint(mailbox, "e2")
    seen: dict[str, int] = {"e1": 0, "e2": 0}
    counted: list[str] = []
    lock = threading.Lock()

    def counter(endpoint: str) -> Callable[[str], bool]:
        def counts(name: str) -> bool:
            with lock:
                seen[endpoint] += 1
            if response_sequence(name) is not None:
                counted.append(name)
                return True
            return False

        return counts

    hub = InboxHub()
    watchers = [InboxWatcher(e / "inbox", hub=hub, counts=counter(e.name)) for e in (first, second)]
    watches = [hub.watch(w.inbox, w) for w in watchers]
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    flooder = context.Process(target=flood, args=(mailbox, log, stop))
    flooder.start()
    try:
        _until(lambda: seen["e1"] >= 500, "the flood of e1 never reached its watcher")
        (first / "outbox" / "closed.json").write_text("{}")
        flooder.join(timeout=WAIT_S)  # it ends with the flooded episode
    finally:
        stop.set()
        flooder.join(timeout=WAIT_S)
        for watch in watches:
            hub.unwatch(watch)
        hub.close()
    assert flooder.exitcode == 0
    flooding = json.loads(log.read_text())
    assert flooding["endpoint"] == "e1"
    assert flooding["from"] < flooding["to"]
    assert seen["e2"] == 0  # the other live endpoint was never flooded
    assert counted == []  # names like responses, never one
    # Nothing is left behind in the inbox (each name is created and removed).
    assert list((first / "inbox").iterdir()) == []


@pytest.mark.parametrize(
    ("module", "extra", "timings"),
    [
        ("instant_actor", [], "written_at.txt"),
        ("paced_actor", ["0.05"], "answered_at.txt"),
    ],
)
def test_the_benchmark_actors_answer_each_observation_and_stamp_it(
    tmp_path: Path, module: str, extra: list[str], timings: str
) -> None:
    """The instant and the paced actor, as real processes on a real endpoint's folders:
    a response the loop's own parser accepts for each observation, one stamp each, and
    an exit once the endpoint is closed."""
    endpoint = _endpoint(tmp_path, "e")
    (endpoint / "scratch").mkdir()
    actor = subprocess.Popen(
        [sys.executable, "-m", f"mailroom.orchestrator.perf.{module}", str(endpoint), "5", *extra]
    )
    try:
        for sequence in (1, 2):
            request_id = f"{sequence:032x}"
            response = endpoint / "inbox" / f"resp-{sequence}.json"
            document = {"request_id": request_id, "response_file": f"inbox/{response.name}"}
            staged = endpoint / "outbox" / ".obs.tmp"
            staged.write_text(json.dumps(document))
            os.replace(staged, endpoint / "outbox" / f"obs-{sequence}.json")
            _until(response.exists, f"no response to observation {sequence}")
            parsed = parse_response(
                response.read_bytes(),
                expected_request_id=request_id,
                limits=ActionLimits(max_chunk=5),
            )
            assert isinstance(parsed, Accepted) and len(parsed.actions) == 5
        (endpoint / "outbox" / "closed.json").write_text("{}")
        assert actor.wait(timeout=WAIT_S) == 0
    finally:
        if actor.poll() is None:
            actor.kill()
            actor.wait()
    stamps = read_stamps(endpoint / "scratch" / timings)
    assert sorted(stamps) == [1, 2] and stamps[1] <= stamps[2]
