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

import os
import sys
from pathlib import Path

from actor_mailbox import answer, observations

CHUNK = 1 << 20


def respond(endpoint: Path, observation: dict[str, object], decision: str) -> None:
    body: dict[str, object] = {"decision": decision}
    if decision == "act":
        body["actions"] = [[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0]]
    answer(endpoint, observation, body)


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
    held: list[bytes] = []
    for sequence, observation in observations(endpoint):
        if sequence == 1:
            held = take(mode, count)
            (endpoint / "scratch" / "took.txt").write_text(f"{mode} {count} {len(held)}")
        respond(endpoint, observation, "stop" if sequence == 3 else "act")
    return 0


if __name__ == "__main__":
    sys.exit(main())
