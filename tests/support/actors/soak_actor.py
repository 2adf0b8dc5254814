#!/usr/bin/env python3
"""Test actor for the faults-at-scale soak: a slow actor that plays the role it is given.

Usage: soak_actor.py ENDPOINT THINK_S [ATTACK_AT]. It waits (up to a minute) for
`inbox/role.txt`, which the test puts there as each endpoint appears (an inbox name that
is not `resp-<n>.json` is never read by the orchestrator), writes its role to
`scratch/role.txt`, then answers every observation after thinking a random 0.5-1.5 x
THINK_S seconds, with actions that depend on the observation's sequence only:

- normal: nothing else;

and from observation ATTACK_AT on (1 unless given; a later one keeps the attacked
episodes live while many others start):

- hostile: its first answers are bad (not JSON, a NaN, another request's id), then good;
- killed: SIGKILLs itself after its first answer;
- flood: churns its inbox with names like responses that are not (`.resp-<n>.json`,
  `resp-<n>.json.part`), about 2,000 a second, the whole episode;
- quota: writes past its scratch quota once (the write fails), removes what it wrote,
  says what happened in `scratch/quota.txt`, then goes on;
- memory: takes memory a MiB at a time, touched, until the kernel ends it;
- fork: forks sleeping children until it may not (its process cap), then goes on.

Standard library only: it runs inside the sandbox.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path

from actor_mailbox import RESPONSE_SCHEMA, observations, write_response

ROLE_WAIT_S = 60.0


def actions(sequence: int) -> list[list[float]]:
    """The same for every episode at this sequence: the bytes then depend on the case."""
    return [
        [
            round(0.4 * math.sin(0.7 * sequence + i), 4),
            round(0.4 * math.cos(0.5 * sequence + i), 4),
            -0.3 if sequence % 2 else 0.3,
            0.0,
            0.0,
            0.0,
            -1.0 if (sequence + i) % 3 else 1.0,
        ]
        for i in range(5)
    ]


def good(observation: dict[str, object], sequence: int) -> str:
    return json.dumps(
        {
            "schema": RESPONSE_SCHEMA,
            "request_id": observation["request_id"],
            "decision": "act",
            "actions": actions(sequence),
        }
    )


def bad(observation: dict[str, object], sequence: int) -> str | None:
    """The hostile actor's first answers from its attack on (`sequence` counts from it)."""
    if sequence == 1:
        return '{"schema": "mailroom.response/v1", "decision": '  # cut short
    if sequence == 2:
        return good(observation, sequence).replace("0.0,", "NaN,", 1)
    if sequence == 3:
        return good(observation, sequence).replace(str(observation["request_id"]), "r-000000")
    return None


def flood(inbox: Path, stop: threading.Event) -> None:
    n = 0
    while not stop.is_set():
        for _ in range(20):
            n += 1
            name = f".resp-{n}.json" if n % 2 else f"resp-{n}.json.part"
            try:
                (inbox / name).write_text("{}")
                (inbox / name).unlink()
            except OSError:
                return  # the endpoint is gone: the episode ended
        time.sleep(0.01)


def take_memory() -> None:
    held = []
    while True:
        held.append(bytearray(b"m" * (1 << 20)))


def fork_until_refused() -> int:
    children = 0
    while children < 10_000:
        try:
            pid = os.fork()
        except OSError:
            return children
        if pid == 0:
            time.sleep(600)
            os._exit(0)
        children += 1
    return children


def main() -> int:
    endpoint = Path(sys.argv[1])
    think_s = float(sys.argv[2])
    attack_at = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    sys.stdin.read()
    deadline = time.monotonic() + ROLE_WAIT_S
    role_file = endpoint / "inbox" / "role.txt"
    while not role_file.exists():
        if time.monotonic() > deadline:
            return 3
        time.sleep(0.02)
    role = role_file.read_text().strip()
    scratch = endpoint / "scratch"
    (scratch / "role.txt").write_text(role)
    stop = threading.Event()
    if role == "flood":
        threading.Thread(target=flood, args=(endpoint / "inbox", stop), daemon=True).start()
    for sequence, observation in observations(endpoint, poll_s=0.02):
        time.sleep(think_s * random.uniform(0.5, 1.5))
        attacking = sequence >= attack_at
        if role == "memory" and attacking:
            take_memory()
        if role == "quota" and sequence == attack_at:
            try:
                (scratch / "fill.bin").write_bytes(b"q" * (64 << 20))
                said = "written"
            except OSError as exc:
                said = exc.strerror or str(exc)
            (scratch / "fill.bin").unlink()  # what was written of it: room to go on
            (scratch / "quota.txt").write_text(said)
        if role == "fork" and sequence == attack_at:
            (scratch / "forked.txt").write_text(str(fork_until_refused()))
        text = bad(observation, sequence - attack_at + 1) if role == "hostile" else None
        write_response(endpoint, observation, text or good(observation, sequence))
        if role == "killed" and attacking:
            os.kill(os.getpid(), signal.SIGKILL)
    stop.set()
    return 0


if __name__ == "__main__":
    sys.exit(main())
