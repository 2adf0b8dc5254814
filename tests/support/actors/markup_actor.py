#!/usr/bin/env python3
"""Test actor whose words are markup (argv: ENDPOINT): a viewer must show them as text.

Call 1: a valid chunk whose note carries a script element and an `onerror=` attribute.
Call 2: an invalid response (an action outside [-1, 1]) carrying the same markup.
Call 3: another valid chunk; call 4: stop, on the task whose instruction names the
alphabet soup; on any other task it goes on acting until the episode is closed. It
prints the markup to stdout and stderr.
Standard library only: it runs inside the sandbox.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

MARKUP = (
    '<script>window.__pwned = "script"</script><img src="x" onerror="window.__pwned = \'onerror\'">'
)


def wait_for(endpoint: Path, sequence: int) -> dict[str, object] | None:
    obs = endpoint / "outbox" / f"obs-{sequence}.json"
    while not obs.exists():
        if (endpoint / "outbox" / "closed.json").exists():
            return None
        time.sleep(0.01)
    document: dict[str, object] = json.loads(obs.read_text())
    return document


def answer(endpoint: Path, observation: dict[str, object], body: dict[str, object]) -> None:
    response = {"schema": "mailroom.response/v1", "request_id": observation["request_id"], **body}
    final = endpoint / str(observation["response_file"])
    tmp = final.with_name(".tmp-" + final.name)
    tmp.write_text(json.dumps(response))
    os.replace(tmp, final)


def main() -> int:
    endpoint = Path(sys.argv[1])
    print(MARKUP, flush=True)
    print(MARKUP, file=sys.stderr, flush=True)
    chunk = [[0.0, 0.0, 0.05, 0.0, 0.0, 0.0, -1.0]] * 5
    bodies: list[dict[str, object]] = [
        {"decision": "act", "actions": chunk, "note": MARKUP},
        {"decision": "act", "actions": [[2.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0]], "note": MARKUP},
        {"decision": "act", "actions": chunk},
        {"decision": "stop"},
    ]
    sequence = 0
    while True:
        sequence += 1
        observation = wait_for(endpoint, sequence)
        if observation is None:
            return 0
        stops = "alphabet" in str(observation.get("instruction", ""))
        body = bodies[sequence - 1] if sequence <= len(bodies) else bodies[2]
        if body["decision"] == "stop" and not stops:
            body = bodies[2]
        answer(endpoint, observation, body)


if __name__ == "__main__":
    sys.exit(main())
