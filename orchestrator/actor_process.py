"""Spawning a blinded actor: scrubbed environment, own process group, scratch as cwd."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

from .lifetime import die_with_parent

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


def scrubbed_environment(home: Path) -> dict[str, str]:
    """Nothing of the orchestrator's environment: no run, benchmark, suite, task or seed."""
    return {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "HOME": str(home)}


class ActorProcess:
    def __init__(self, argv: Sequence[str], *, instructions: str, workdir: Path) -> None:
        self.argv = list(argv)
        self.env = scrubbed_environment(workdir)
        self.workdir = workdir
        self._proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=workdir,
            env=self.env,
            start_new_session=True,
            close_fds=True,
            preexec_fn=die_with_parent,
        )
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(instructions.encode("utf-8"))
            self._proc.stdin.close()
        except BrokenPipeError:
            pass  # an actor that exits at once is judged by what it wrote, not here

    def description(self) -> dict[str, object]:
        return {"pid": self._proc.pid, "argv": self.argv, "env": self.env, "cwd": str(self.workdir)}

    @property
    def pid(self) -> int:
        return self._proc.pid

    def poll(self) -> int | None:
        return self._proc.poll()

    def alive(self) -> bool:
        return self._proc.poll() is None

    def stop(self, grace_s: float = 2.0) -> int:
        """End the actor's whole process group; returns its exit status."""
        if self._proc.poll() is None:
            self._signal_group(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=grace_s)
        self._signal_group(signal.SIGKILL)  # children that outlived the leader
        return self._proc.wait()

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)


def render_command(template: Sequence[str], **values: str) -> list[str]:
    """Substitute `{name}` fields in each argument; nothing else is interpreted."""
    out: list[str] = []
    for arg in template:
        for key, value in values.items():
            arg = arg.replace("{" + key + "}", value)
        out.append(arg)
    return out
