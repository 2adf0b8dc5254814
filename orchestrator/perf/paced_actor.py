"""The flood section's actor: thinks, then answers each observation with a full chunk.

Like the instant actor it waits on inotify, never spins, and it imports the project (so
it runs unconfined). Before each answer it thinks a random 0.5-1.5 x THINK_S seconds. Just
before each rename it appends `<sequence> <time.time()>` to `scratch/answered_at.txt`,
on the clock of the orchestrator's event records, so the benchmark can tell how long a
response waited from its rename until its claim, detection included.

Usage: python -m mailroom.orchestrator.perf.paced_actor ENDPOINT CHUNK THINK_S
"""

from __future__ import annotations

import functools
import json
import random
import sys
import time
from pathlib import Path

from mailroom.mailbox.watcher import InboxWatcher
from mailroom.orchestrator.perf.detection import act_response, write_response
from mailroom.orchestrator.perf.instant_actor import first_present, read_stamps

TIMINGS_FILE = "answered_at.txt"


def run(endpoint: Path, chunk: int, think_s: float) -> int:
    outbox, sequence = endpoint / "outbox", 1
    watcher = InboxWatcher(outbox)
    watcher.start()
    try:
        with (endpoint / "scratch" / TIMINGS_FILE).open("a", encoding="utf-8") as timings:
            while True:
                seen = watcher.wait_until(
                    functools.partial(
                        first_present, outbox / f"obs-{sequence}.json", outbox / "closed.json"
                    ),
                    timeout=600.0 + 2 * think_s,
                )
                if seen is None or seen.name == "closed.json":
                    return 0
                time.sleep(think_s * random.uniform(0.5, 1.5))
                document = json.loads(seen.read_text(encoding="utf-8"))
                answered_at = time.time()
                write_response(
                    endpoint / document["response_file"],
                    act_response(document["request_id"], chunk),
                )
                timings.write(f"{sequence} {answered_at!r}\n")
                timings.flush()
                sequence += 1
    finally:
        watcher.stop()


def read_answer_times(endpoint: Path) -> dict[int, float]:
    """When each response was written (`time.time()`), by sequence."""
    return read_stamps(endpoint / "scratch" / TIMINGS_FILE)


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))
