"""The flood section's actor: thinks, then answers each observation with a full chunk.

Like the instant actor it waits on inotify, never spins, and it imports the project (so
it runs unconfined). Before each answer it thinks a random 0.5-1.5 x THINK_S seconds.
It stamps `time.time()` just before writing each response (the clock of the
orchestrator's event records) and appends `<sequence> <stamp>` to
`scratch/answered_at.txt`, so the benchmark can tell how long a response waited from
its writing until its claim, detection included.

Usage: python -m mailroom.orchestrator.perf.paced_actor ENDPOINT CHUNK THINK_S
"""

from __future__ import annotations

import functools
import json
import random
import sys
import time
from pathlib import Path

from mailroom.orchestrator.perf.detection import act_response, write_response
from mailroom.orchestrator.perf.instant_actor import answer_each, read_stamps

TIMINGS_FILE = "answered_at.txt"


def answer_after_thinking(endpoint: Path, chunk: int, think_s: float, observation: Path) -> float:
    """Think, then write the response; returns when the writing began (`time.time()`)."""
    time.sleep(think_s * random.uniform(0.5, 1.5))
    document = json.loads(observation.read_text(encoding="utf-8"))
    answered_at = time.time()
    write_response(
        endpoint / document["response_file"], act_response(document["request_id"], chunk)
    )
    return answered_at


def run(endpoint: Path, chunk: int, think_s: float) -> int:
    respond = functools.partial(answer_after_thinking, endpoint, chunk, think_s)
    return answer_each(endpoint, respond, TIMINGS_FILE, timeout_s=600.0 + 2 * think_s)


def read_answer_times(endpoint: Path) -> dict[int, float]:
    """When each response was written (`time.time()`), by sequence."""
    return read_stamps(endpoint / "scratch" / TIMINGS_FILE)


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))
