"""Spawns one blinded actor process and keeps its output privately.

Its environment is scrubbed, it leads its own process group with its scratch folder as
working directory, and the sandbox confines it unless the run says `none`.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from mailroom.orchestrator.actors.actor_filesystem import (
    ActorFilesystem,
    KeptContents,
    filesystem_record,
)
from mailroom.orchestrator.actors.actor_network import ActorNetwork
from mailroom.orchestrator.actors.actor_program import SAFE_PATH
from mailroom.orchestrator.actors.confinement import REDACTED
from mailroom.orchestrator.actors.lifetime import (
    die_with_this_process,
    loaded_libc,
    proc_of_the_namespace,
    start_in_namespace,
)
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.actors.memory_cgroup import EpisodeCgroup, ceiling_record, joined_first
from mailroom.orchestrator.actors.outer_identity import OuterIdentity, kill_leftovers
from mailroom.orchestrator.actors.sandbox import SandboxCommand

OUTPUT_CAP_BYTES = ActorLimits().output_mb << 20  # kept of each of stdout and stderr
EPISODE_TOKEN = "<the episode's gateway token; value not recorded>"


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


PR_SET_DUMPABLE = 4


def first_for_the_oom_killer() -> None:
    """Raise this process's OOM score to the most. After a change of user the kernel
    makes it non-dumpable, which leaves its own /proc files root's; the flag is put back
    first (exec sets it anew in any case)."""
    loaded_libc().prctl(PR_SET_DUMPABLE, 1)
    with open("/proc/self/oom_score_adj", "w") as adj:
        adj.write("1000")


def _child_setup(
    rlimits: list[tuple[int, int]],
    identity: OuterIdentity,
    processes: int | None,
    *,
    namespace_proc: bool = True,
    filesystem: ActorFilesystem | None = None,
    network: ActorNetwork | None = None,
) -> Callable[[], None]:
    """Runs in the actor between fork and exec: a `/proc` of the worker's pid namespace
    (when it holds one: `lifetime.py`; only for bubblewrap, which looks its child up
    there: an unconfined actor keeps the host's, as it would without the namespace),
    the actor's bounded tmpfs (`actor_filesystem.py`, as root), its own network namespace
    with the gateway's socket (`actor_network.py`, as root), the change of user, then
    die with the worker
    (a change of user clears the parent-death signal) and apply the limits. An actor
    with a user of its own also gets a process cap (which counts exactly its own
    processes) and is the first the OOM killer picks."""
    die = die_with_this_process()
    own_proc = proc_of_the_namespace() if namespace_proc else (lambda: None)
    own_filesystem = filesystem.child_step() if filesystem is not None else (lambda: None)
    own_network = network.child_step() if network is not None else (lambda: None)
    own_user = identity.uid is not None
    wanted = list(rlimits)
    if own_user and processes is not None:
        wanted.append((resource.RLIMIT_NPROC, processes))

    def setup() -> None:
        own_proc()  # as root: it mounts
        own_filesystem()  # as root, after the pid namespace's /proc: it mounts too
        own_network()  # as root: a network namespace of its own
        if identity.uid is not None and identity.gid is not None:
            os.setgroups([])
            os.setregid(identity.gid, identity.gid)
            os.setreuid(identity.uid, identity.uid)
        die()
        if own_user:
            first_for_the_oom_killer()
        for which, value in wanted:
            resource.setrlimit(which, (value, value))

    return setup


@dataclass
class CapturedStream:
    """One output stream of the actor: the first `cap` bytes kept, the rest counted."""

    name: str
    path: Path | None
    cap: int = OUTPUT_CAP_BYTES
    total: int = 0

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    def drain(self, pipe: IO[bytes]) -> None:
        sink = None if self.path is None else self.path.open("wb")
        try:
            while chunk := os.read(pipe.fileno(), 65536):
                room = max(0, self.cap - self.total)
                if sink is not None and room:
                    sink.write(chunk[:room])
                self.total += len(chunk)
            if sink is not None and self.truncated:
                dropped = self.total - self.cap
                sink.write(f"\n[mailroom: truncated here; {dropped} more bytes]\n".encode())
        finally:
            pipe.close()
            if sink is not None:
                sink.close()

    def document(self) -> dict[str, object]:
        return {
            "file": None if self.path is None else self.path.name,
            "bytes": self.total,
            "kept_bytes": min(self.total, self.cap),
            "truncated": self.truncated,
        }


def _private_file(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    os.close(fd)


class ActorProcess:
    """One actor process; with `sandbox`, the process is bubblewrap running the actor."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        instructions: str,
        workdir: Path,
        limits: ActorLimits | None = None,
        output_files: Mapping[str, Path] | None = None,
        passed_env: Mapping[str, str] | None = None,
        fixed_env: Mapping[str, str] | None = None,
        sandbox: SandboxCommand | None = None,
        identity: OuterIdentity | None = None,
        confinement: dict[str, object] | None = None,
        memory: EpisodeCgroup | None = None,
        filesystem: ActorFilesystem | None = None,
        filesystem_note: str | None = None,
        network: ActorNetwork | None = None,
        secret_env: Sequence[str] = (),
    ) -> None:
        self.argv = list(argv)
        self.limits = limits or ActorLimits()
        # The profile's fixed, public values (recorded) and the passed ones (never).
        self.env = {**scrubbed_environment(workdir), **(fixed_env or {}), **(passed_env or {})}
        self._passed = sorted(passed_env or {})
        self._secret = sorted(secret_env)  # the episode's gateway token: never written
        self.workdir = workdir
        self.identity = identity or OuterIdentity(None, None)
        self.confinement = confinement or {"mode": "none"}
        self.memory = memory  # the episode's memory cgroup, joined between fork and exec
        # The actor's bounded tmpfs (scratch/, /tmp, /dev/shm), kept into its endpoint
        # (workdir's parent) after the stop; or why its space is the sampled quota.
        self.filesystem = filesystem
        self.filesystem_note = filesystem_note
        self.kept: KeptContents | dict[str, str] | None = None
        # Its route to the provider gateway: the listening socket it reaches, taken by
        # the episode once the spawn returned (`actor_network.py`).
        self.network = network
        self.gateway_token: str | None = None  # set by its launcher with the network
        # Where each stream is kept (the run's layout names the files), or nowhere.
        files = output_files or {}
        self.streams = {
            name: CapturedStream(name, files.get(name), self.limits.output_mb << 20)
            for name in ("stdout", "stderr")
        }
        for stream in self.streams.values():
            if stream.path is not None:
                _private_file(stream.path)
        popen_argv = self.argv if sandbox is None else sandbox.argv
        try:
            # In the worker's own pid namespace when it holds one: the actor dies with
            # the worker whatever bubblewrap's set-up is doing (`lifetime.py`).
            with start_in_namespace():
                self._proc = subprocess.Popen(
                    popen_argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=workdir if sandbox is None else "/",
                    env=self.env,
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=() if sandbox is None else tuple(sandbox.pass_fds),
                    preexec_fn=joined_first(
                        memory,
                        _child_setup(
                            _limit_resources(self.limits),
                            self.identity,
                            self.limits.processes,
                            namespace_proc=sandbox is not None,
                            filesystem=filesystem,
                            network=network,
                        ),
                    ),
                )
        except BaseException:
            if filesystem is not None:
                filesystem.close()
            if network is not None:
                network.close()
            raise
        finally:
            if sandbox is not None:
                sandbox.close()
        try:
            if filesystem is not None:
                filesystem.receive()
            if network is not None:
                network.receive()
        except BaseException:
            self._proc.kill()
            self._proc.wait()
            if filesystem is not None:
                filesystem.close()
            if network is not None:
                network.close()
            raise
        assert self._proc.stdout is not None and self._proc.stderr is not None
        self._drains = [
            threading.Thread(target=self.streams[name].drain, args=(pipe,), daemon=True)
            for name, pipe in (("stdout", self._proc.stdout), ("stderr", self._proc.stderr))
        ]
        for thread in self._drains:
            thread.start()
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(instructions.encode("utf-8"))
            self._proc.stdin.close()
        except BrokenPipeError:
            pass  # an actor that exits at once is judged by what it wrote, not here
        self.leftover_processes: int | None = None
        self.exited_by_itself: bool | None = None

    def description(self) -> dict[str, object]:
        """What the actor was given; passed-through values are never written."""
        env = {k: (REDACTED if k in self._passed else v) for k, v in self.env.items()}
        env.update({k: EPISODE_TOKEN for k in self._secret if k in env})
        described: dict[str, object] = {
            "pid": self._proc.pid,
            "argv": self.argv,
            "env": env,
            "cwd": str(self.workdir),
            "limits": self.limits.model_dump(),
            "confinement": self.confinement,
            "memory": ceiling_record(self.limits.memory_mb, self.memory),
            "filesystem": filesystem_record(self.filesystem, self.filesystem_note),
        }
        if self.network is not None:
            described["network"] = self.network.document()
        return described

    @property
    def pid(self) -> int:
        return self._proc.pid

    def poll(self) -> int | None:
        return self._proc.poll()

    def alive(self) -> bool:
        return self._proc.poll() is None

    def stop(self, grace_s: float = 2.0, exit_window_s: float | None = None) -> int:
        """End the actor's whole process group (for a sandbox: its pid namespace, with
        every process in it); returns its exit status.

        An actor that saw `closed.json` first gets `exit_window_s` to exit by itself
        (and flush its output); bubblewrap does not pass SIGTERM on, so a sandboxed
        actor still running then is killed outright.
        """
        window = self.limits.exit_window_s if exit_window_s is None else exit_window_s
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=window)
        self.exited_by_itself = self._proc.poll() is not None
        if self._proc.poll() is None:
            self._signal_group(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=grace_s)
        self._signal_group(signal.SIGKILL)  # children that outlived the leader
        status = self._proc.wait()
        if self.identity.uid is not None and self.leftover_processes is None:
            self.leftover_processes = kill_leftovers(self.identity.uid)
        self._keep_filesystem()
        if self.network is not None:
            self.network.close()  # a socket the episode did not take
        if self.memory is not None:
            self.memory.remove()  # once its processes are gone (any left are killed)
        self.identity.release()  # the uid is free for another sandbox only now
        for thread in self._drains:
            thread.join(timeout=5)
        return status

    def _keep_filesystem(self) -> None:
        """Its tmpfs's contents into the endpoint, for the audit; then it is let go."""
        if self.filesystem is None or self.kept is not None:
            return
        try:
            self.kept = self.filesystem.keep(self.workdir.parent)
        except Exception as exc:  # the rest of the stop goes on, whatever the actor left
            self.kept = {"error": f"its contents were not kept: {type(exc).__name__}: {exc}"}
        finally:
            self.filesystem.close()

    def stop_details(self) -> dict[str, object]:
        """The kept output, whether the actor had exited by itself within its exit window
        (or had to be ended), and (for a sandbox user) how many of its processes were
        still alive after the stop and were killed then: none is expected."""
        details: dict[str, object] = {
            "output": {name: stream.document() for name, stream in self.streams.items()},
            "exited_by_itself": self.exited_by_itself,
        }
        if self.leftover_processes is not None:
            details["leftover_processes"] = self.leftover_processes
        if self.memory is not None:
            details["memory"] = self.memory.outcome()
        if isinstance(self.kept, KeptContents):
            details["filesystem"] = self.kept.document()
        elif self.kept is not None:
            details["filesystem"] = self.kept
        return details

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
