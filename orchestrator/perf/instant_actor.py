"""The benchmark's instant actor: answers each observation at once with a full chunk.

It is its own process, like every real actor, and waits on inotify, never spins, so it
costs the orchestrator nothing but the mailbox itself.

Usage: python -m mailroom.orchestrator.perf.instant_actor ENDPOINT CHUNK

After each response it appends `<sequence> <perf_counter>` to `scratch/written_at.txt`,
stamped just before the rename that makes the response visible (as the detection
benchmark does; CLOCK_MONOTONIC, comparable across processes), so the benchmark can
split response detection from the rest.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path

from mailroom.mailbox.watcher import InboxWatcher
from mailroom.orchestrator.perf.detection import act_response, write_response

TIMINGS_FILE = "written_at.txt"


def _first_present(*paths: Path) -> Path | None:
    return next((p for p in paths if p.exists()), None)


def answer(endpoint: Path, observation: Path, chunk: int) -> float:
    """Write the response; returns when its rename began."""
    document = json.loads(observation.read_text(encoding="utf-8"))
    final = endpoint / document["response_file"]
    return write_response(final, act_response(document["request_id"], chunk))


def answer_each(
    endpoint: Path, respond: Callable[[Path], float], timings_file: str, timeout_s: float = 600.0
) -> int:
    """A benchmark actor's loop: wait on inotify for each observation in turn (until
    `closed.json`), `respond` to it (it writes the response and returns the stamp to
    keep) and append `<sequence> <stamp>` to `scratch/<timings_file>`."""
    outbox, sequence = endpoint / "outbox", 1
    watcher = InboxWatcher(outbox)
    watcher.start()
    try:
        with (endpoint / "scratch" / timings_file).open("a", encoding="utf-8") as timings:
            while True:
                seen = watcher.wait_until(
                    functools.partial(
                        _first_present, outbox / f"obs-{sequence}.json", outbox / "closed.json"
                    ),
                    timeout=timeout_s,
                )
                if seen is None or seen.name == "closed.json":
                    return 0
                stamp = respond(seen)
                timings.write(f"{sequence} {stamp!r}\n")
                timings.flush()
                sequence += 1
    finally:
        watcher.stop()


def run(endpoint: Path, chunk: int) -> int:
    return answer_each(endpoint, functools.partial(answer, endpoint, chunk=chunk), TIMINGS_FILE)


def read_stamps(path: Path) -> dict[int, float]:
    """A benchmark actor's `<sequence> <time>` lines, by sequence; none if it kept none."""
    written: dict[int, float] = {}
    if not path.exists():
        return written
    for line in path.read_text(encoding="utf-8").splitlines():
        sequence, at = line.split()
        written[int(sequence)] = float(at)
    return written


def read_timings(endpoint: Path) -> dict[int, float]:
    return read_stamps(endpoint / "scratch" / TIMINGS_FILE)


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1]), int(sys.argv[2])))
