#!/usr/bin/env python3
"""Test actor that answers its first observation at once, then holds its second answer
until a test opens its gate: a slow actor whose slowness is an event, not a guess.

argv: ENDPOINT. The gate is a file named `gate` in the endpoint's inbox/, made by the
test (a name the orchestrator never reads; the actor's scratch/ is its own filesystem,
which the host does not see while it runs). The first answer is a small, harmless chunk
(so the episode has executed controls, written steps and opened its videos); the
second, once the gate is open, is `stop`. It stops waiting after GIVE_UP_S and answers
anyway: the test then fails on what it checks. Standard library only: it runs inside
the sandbox, and it polls slowly (hundreds of these wait at once on a few cores).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

POLL_S = 0.25
GIVE_UP_S = 900.0


def write_atomically(path: Path, document: dict[str, object]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(document), encoding="utf-8")
    os.replace(tmp, path)


def wait_for(path: Path, *, unless: Path | None = None) -> bool:
    deadline = time.monotonic() + GIVE_UP_S
    while time.monotonic() < deadline:
        if path.exists():
            return True
        if unless is not None and unless.exists():
            return False
        time.sleep(POLL_S)
    return False


def answer(endpoint: Path, sequence: int, decision: dict[str, object]) -> bool:
    """Answer observation `sequence`; False if the episode closed first."""
    observation = endpoint / "outbox" / f"obs-{sequence}.json"
    if not wait_for(observation, unless=endpoint / "outbox" / "closed.json"):
        return False
    document = json.loads(observation.read_text(encoding="utf-8"))
    response = {
        "schema": "mailroom.response/v1",
        "request_id": document["request_id"],
        **decision,
    }
    if decision.get("decision") == "act":
        size = int(document["action_spec"]["max_chunk"])
        response["actions"] = [[0.0, 0.0, 0.05, 0.0, 0.0, 0.0, -1.0]] * size
    write_atomically(endpoint / str(document["response_file"]), response)
    return True


def main() -> int:
    endpoint = Path(sys.argv[1])
    if not answer(endpoint, 1, {"decision": "act"}):
        return 0
    wait_for(endpoint / "inbox" / "gate")
    answer(endpoint, 2, {"decision": "stop"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
