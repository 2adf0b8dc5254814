#!/usr/bin/env python3
"""Test actor: records what it was given, acts forever, and dies on one chosen task.

It writes scratch/probe.json (environment, argv, cwd, standard input) so a test can
check that nothing the actor received names the run or the case. If the instruction
contains DIE_WORD it kills itself with SIGKILL after its first response. With
--delay it waits before each response (to be interrupted mid-episode).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

DIE_WORD = "moka"


def main() -> int:
    endpoint = Path(sys.argv[1])
    delay = float(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--delay" else 0.0
    probe = {
        "env": dict(os.environ),
        "argv": sys.argv,
        "cwd": os.getcwd(),
        "stdin": sys.stdin.read(),
        "pid": os.getpid(),
    }
    (endpoint / "scratch" / "probe.json").write_text(json.dumps(probe))
    sequence = 1
    while True:
        obs_file = endpoint / "outbox" / f"obs-{sequence}.json"
        while not obs_file.exists():
            if (endpoint / "outbox" / "closed.json").exists():
                return 0
            time.sleep(0.01)
        observation = json.loads(obs_file.read_text())
        time.sleep(delay)
        response = {
            "schema": "mailroom.response/v1",
            "request_id": observation["request_id"],
            "decision": "act",
            "actions": [[0.0, 0.0, 0.05, 0.0, 0.0, 0.0, -1.0]] * 5,
        }
        final = endpoint / observation["response_file"]
        tmp = final.with_name(".tmp-" + final.name)
        tmp.write_text(json.dumps(response))
        os.replace(tmp, final)
        if DIE_WORD in observation["instruction"] and sequence == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        sequence += 1


if __name__ == "__main__":
    sys.exit(main())
