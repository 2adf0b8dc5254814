"""Spawning a blinded actor: scrubbed environment, own process group, scratch as cwd."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from .lifetime import die_with_this_process
from .settings import ActorLimits

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


def scrubbed_environment(home: Path) -> dict[str, str]:
    """Nothing of the orchestrator's environment: no run, benchmark, suite, task or seed."""
    return {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "HOME": str(home)}


def _limit_resources(limits: ActorLimits) -> list[tuple[int, int]]:
    wanted: list[tuple[int, int]] = []
    if limits.cpu_seconds is not None:
        wanted.append((resource.RLIMIT_CPU, limits.cpu_seconds))
    if limits.file_size_mb is not None:
        wanted.append((resource.RLIMIT_FSIZE, limits.file_size_mb * 1024 * 1024))
    if limits.open_files is not None:
        wanted.append((resource.RLIMIT_NOFILE, limits.open_files))
    return wanted


def _child_setup(rlimits: list[tuple[int, int]]) -> Callable[[], None]:
    """Runs in the actor between fork and exec: die with the worker, apply the limits."""
    die = die_with_this_process()

    def setup() -> None:
        die()
        for which, value in rlimits:
            resource.setrlimit(which, (value, value))

    return setup


class ActorProcess:
    def __init__(
        self,
        argv: Sequence[str],
        *,
        instructions: str,
        workdir: Path,
        limits: ActorLimits | None = None,
    ) -> None:
        self.argv = list(argv)
        self.limits = limits or ActorLimits()
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
            preexec_fn=_child_setup(_limit_resources(self.limits)),
        )
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(instructions.encode("utf-8"))
            self._proc.stdin.close()
        except BrokenPipeError:
            pass  # an actor that exits at once is judged by what it wrote, not here

    def description(self) -> dict[str, object]:
        return {
            "pid": self._proc.pid,
            "argv": self.argv,
            "env": self.env,
            "cwd": str(self.workdir),
            "limits": self.limits.model_dump(),
        }

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
