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

import sys
from pathlib import Path

from actor_mailbox import answer, observations

NOTES = (
    '<script>alert("note")</script><img src=x onerror="alert(1)">',
    "**bold** [a link](javascript:alert(2)) `code` & <b>tag</b>\nsecond line",
    "stopping: </span>{{ template }} ${shell}",
)
STEP = [0.0, 0.0, 0.05, 0.0, 0.0, 0.0, -1.0]
OUT_OF_RANGE = [2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]


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
    for sequence, observation in observations(endpoint):
        answer(endpoint, observation, body_for(sequence, str(observation.get("instruction", ""))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
