#!/usr/bin/env python3
"""Built-in diagnostic actor: a few small valid action chunks, then stop.

Infrastructure evidence only, never a capability score. Standard library only, and it
touches nothing but the endpoint it is given, exactly like an external actor would.

Usage: actor.py ENDPOINT [--chunks N] [--think SECONDS]

`--think` waits that long before each answer, as a slow actor (an LLM agent takes
10-100 s a decision) would: for measuring and testing many live episodes at once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

# Looked for every 10 ms at first, less often the longer the wait (at most every 50 ms):
# a quick answer stays quick, and a long wait costs a few polls a second.
POLL_S = (0.01, 0.05)
GIVE_UP_S = 900.0


def write_atomically(path: Path, document: dict[str, object]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        json.dump(document, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def wait_for_observation(endpoint: Path, sequence: int) -> dict[str, object] | None:
    obs_file = endpoint / "outbox" / f"obs-{sequence}.json"
    closed = endpoint / "outbox" / "closed.json"
    started = time.monotonic()
    while (waited := time.monotonic() - started) < GIVE_UP_S:
        if obs_file.exists():
            document: dict[str, object] = json.loads(obs_file.read_text(encoding="utf-8"))
            return document
        if closed.exists():
            return None
        time.sleep(min(POLL_S[1], max(POLL_S[0], waited / 20)))
    return None


def decide(sequence: int, chunks: int, spec: dict[str, object]) -> dict[str, object]:
    if sequence > chunks:
        return {"decision": "stop"}
    max_chunk = int(str(spec["max_chunk"]))
    # Small, slow motions with the gripper open: harmless and easy to see in a video.
    dz = -0.1 if sequence % 2 else 0.1
    if spec.get("controller") == "OSC_POSE" and spec.get("dimension") == 7:
        vector = [0.0, 0.0, dz, 0.0, 0.0, 0.0, -1.0]
    else:
        # Another robot (protocol v2): the middle of each component's range, the third
        # nudged by a tenth of its half-range.
        low, high = float(str(spec["low"])), float(str(spec["high"]))
        middle, half = (low + high) / 2, (high - low) / 2
        vector = [middle] * int(str(spec["dimension"]))
        if len(vector) > 2:
            vector[2] = middle + dz * half
    return {"decision": "act", "actions": [vector] * max_chunk}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("endpoint", type=Path)
    parser.add_argument("--chunks", type=int, default=3)
    parser.add_argument("--think", type=float, default=0.0)
    args = parser.parse_args(argv)
    endpoint: Path = args.endpoint
    sequence = 1
    while True:
        observation = wait_for_observation(endpoint, sequence)
        if observation is None:
            return 0
        spec = observation["action_spec"]
        assert isinstance(spec, dict)
        # The response's protocol version is the observation's.
        version = str(observation["schema"]).rpartition("/")[2]
        response: dict[str, object] = {
            "schema": f"mailroom.response/{version}",
            "request_id": observation["request_id"],
            **decide(sequence, args.chunks, spec),
        }
        if args.think > 0:
            time.sleep(args.think)
        write_atomically(endpoint / str(observation["response_file"]), response)
        if response["decision"] == "stop":
            return 0
        sequence += 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
