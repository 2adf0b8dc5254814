#!/usr/bin/env python3
"""Test actor that acts one control per call and writes markup in its notes (argv:
ENDPOINT): a recording must keep its words as text.

Call 1: one vector, its note NOTES[0]. Call 2: an invalid response (an action outside
[-1, 1]), its note NOTES[1]. Call 3: `stop` with the note NOTES[2] on the task whose
instruction names the plum; on any other task one vector, and one vector at every
later call until the episode is closed. Standard library only: it runs inside the
sandbox.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

NOTES = (
    '<script>alert("note")</script><img src=x onerror="alert(1)">',
    "**bold** [a link](javascript:alert(2)) `code` & <b>tag</b>\nsecond line",
    "stopping: </span>{{ template }} ${shell}",
)
STEP = [0.0, 0.0, 0.05, 0.0, 0.0, 0.0, -1.0]
OUT_OF_RANGE = [2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]


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


def body_for(sequence: int, instruction: str) -> dict[str, object]:
    if sequence == 1:
        return {"decision": "act", "actions": [STEP], "note": NOTES[0]}
    if sequence == 2:
        return {"decision": "act", "actions": [OUT_OF_RANGE], "note": NOTES[1]}
    if sequence == 3 and "plum" in instruction:
        return {"decision": "stop", "note": NOTES[2]}
    return {"decision": "act", "actions": [STEP]}


def main() -> int:
    endpoint = Path(sys.argv[1])
    sequence = 0
    while True:
        sequence += 1
        observation = wait_for(endpoint, sequence)
        if observation is None:
            return 0
        answer(endpoint, observation, body_for(sequence, str(observation.get("instruction", ""))))


if __name__ == "__main__":
    sys.exit(main())
