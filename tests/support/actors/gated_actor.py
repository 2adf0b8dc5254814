#!/usr/bin/env python3
"""Test actor that waits until a test opens its gate, then becomes another actor
(argv: ENDPOINT PROGRAM [ARG...]; it runs `python PROGRAM ENDPOINT ARG...`).

The gate is a file named `gate` in the endpoint's inbox/, made by the test (a name the
orchestrator never reads; the actor's scratch/ is its own filesystem, which the host
does not see while it runs). A test holds episodes live at once this way, by waiting for
the event (every episode's first observation published) instead of guessing how long
the simulator builds take. It stops waiting after GIVE_UP_S and goes on: the test
then fails on what it checks. It reads nothing else, so the actor it becomes answers
exactly as it does alone. Standard library only: it runs inside the sandbox.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

GIVE_UP_S = 900.0


def main() -> int:
    endpoint, program, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    gate = Path(endpoint) / "inbox" / "gate"
    deadline = time.monotonic() + GIVE_UP_S
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.execv(sys.executable, [sys.executable, program, endpoint, *rest])


if __name__ == "__main__":
    sys.exit(main())
