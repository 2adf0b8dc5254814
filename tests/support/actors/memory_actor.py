#!/usr/bin/env python3
"""Test actor that takes memory once it sees its first observation (argv: ENDPOINT MODE N).

Modes: `heap` fills N MiB of its own memory, `shm` writes N MiB into a file in /dev/shm
(a tmpfs of its sandbox), `files` makes N empty files there (kernel memory: inodes and
directory entries), `polite` takes nothing. Each writes `took.txt` in its
scratch folder once it holds all of it, then answers every observation with one small
chunk until the episode closes, or stops at the 3rd. Standard library only: it runs
inside the sandbox.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

CHUNK = 1 << 20


def wait_for(endpoint: Path, sequence: int) -> dict[str, object] | None:
    obs = endpoint / "outbox" / f"obs-{sequence}.json"
    while not obs.exists():
        if (endpoint / "outbox" / "closed.json").exists():
            return None
        time.sleep(0.01)
    document: dict[str, object] = json.loads(obs.read_text())
    return document


def answer(endpoint: Path, observation: dict[str, object], decision: str) -> None:
    response: dict[str, object] = {
        "schema": "mailroom.response/v1",
        "request_id": observation["request_id"],
        "decision": decision,
    }
    if decision == "act":
        response["actions"] = [[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0]]
    final = endpoint / str(observation["response_file"])
    tmp = final.with_name(".tmp-" + final.name)
    tmp.write_text(json.dumps(response))
    os.replace(tmp, final)


def take(mode: str, count: int) -> list[bytes]:
    """Memory held until the actor exits, one touched MiB at a time."""
    held: list[bytes] = []
    if mode == "heap":
        for index in range(count):
            held.append(bytes([index % 251 + 1]) * CHUNK)
    elif mode == "shm":
        with open("/dev/shm/fill", "wb") as out:
            for index in range(count):
                out.write(bytes([index % 251 + 1]) * CHUNK)
    elif mode == "files":
        for index in range(count):
            os.close(os.open(f"/dev/shm/f{index}", os.O_CREAT | os.O_WRONLY, 0o600))
    return held


def main() -> int:
    endpoint, mode, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    sequence = 1
    held: list[bytes] = []
    while (observation := wait_for(endpoint, sequence)) is not None:
        if sequence == 1:
            held = take(mode, count)
            (endpoint / "scratch" / "took.txt").write_text(f"{mode} {count} {len(held)}")
        answer(endpoint, observation, "stop" if sequence == 3 else "act")
        sequence += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
