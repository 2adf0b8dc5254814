#!/usr/bin/env python3
"""Test actor that misbehaves in one declared way (argv: ENDPOINT MODE [ARG]).

Modes: crash_before_first, crash_mid, report_limits, temp_never_renamed,
hang_with_child, flood, giant_file, sparse_file, symlink_outbox ARG=target,
hardlink_obs, chmod_outbox. Standard library only: it runs inside the sandbox.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from actor_mailbox import answer, wait_for


def respond(endpoint: Path, observation: dict[str, object], decision: str = "act") -> None:
    body: dict[str, object] = {"decision": decision}
    if decision == "act":
        body["actions"] = [[0.0, 0.0, 0.05, 0.0, 0.0, 0.0, -1.0]] * 5
    answer(endpoint, observation, body)


def hang() -> None:
    while True:
        time.sleep(3600)


def main() -> int:
    endpoint, mode = Path(sys.argv[1]), sys.argv[2]
    extra = sys.argv[3] if len(sys.argv) > 3 else ""
    (endpoint / "scratch" / "actor.pid").write_text(str(os.getpid()))
    if mode == "crash_before_first":
        return 3
    first = wait_for(endpoint, 1)
    assert first is not None
    if mode == "report_limits":  # the kernel's own view of this process's limits
        (endpoint / "scratch" / "limits.txt").write_text(Path("/proc/self/limits").read_text())
        mode = "crash_mid"
    if mode == "crash_mid":
        respond(endpoint, first)
        second = wait_for(endpoint, 2)
        assert second is not None
        respond(endpoint, second)
        wait_for(endpoint, 3)
        return 3
    if mode == "temp_never_renamed":
        (endpoint / "inbox" / ".resp-1.json.tmp").write_text('{"schema": "mailroom.resp')
        hang()
    if mode == "hang_with_child":
        child = subprocess.Popen(["sleep", "600"])
        (endpoint / "scratch" / "child.pid").write_text(str(child.pid))
        hang()
    if mode == "flood":
        for i in range(3000):
            (endpoint / "inbox" / f"junk-{i}.txt").write_text("x")
            (endpoint / "scratch" / f"note-{i}.txt").write_text("x")
        respond(endpoint, first)
        second = wait_for(endpoint, 2)
        assert second is not None
        respond(endpoint, second, "stop")
        return 0
    if mode == "giant_file":
        block = b"\0" * (1 << 20)
        with (endpoint / "scratch" / "giant.bin").open("wb") as fh:
            for _ in range(4096):  # 4 GiB unless a file-size limit stops it first
                fh.write(block)
                fh.flush()
        hang()
    if mode == "sparse_file":
        with (endpoint / "scratch" / "sparse.bin").open("wb") as fh:
            fh.truncate(8 << 30)
        hang()
    if mode == "symlink_outbox":
        outbox = endpoint / "outbox"
        outbox.rename(endpoint / "outbox-moved")
        outbox.symlink_to(extra)
        respond(endpoint, first | {"response_file": "inbox/resp-1.json"})
        hang()
    if mode == "hardlink_obs":
        os.link(endpoint / "outbox" / "obs-1.json", endpoint / "inbox" / "resp-1.json")
        hang()
    if mode == "chmod_outbox":
        os.chmod(endpoint / "outbox", 0)
        respond(endpoint, first)
        hang()
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    sys.exit(main())
