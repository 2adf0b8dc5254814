"""One mailroom worker on a cluster node: a Ray actor with its slots.

It runs the local executor's `LiveEpisodes` loop over a staging run directory on its
node (the simulators, endpoints and sandboxed actors of its episodes all live on that
node) and talks to the driver only through `drain`, `offer` and `ack`:

- every line an attempt appends to its event log goes to the driver as it is written;
  the first line that announces an observation waits for the driver's `ack`, so the
  driver's run directory knows an attempt may have been seen before its actor sees it;
- a finished attempt's files follow its last event line, the result last, before the
  report that it finished; its staging copy is then removed;
- the worker asks for work when a slot is free and nothing is queued; the driver
  offers one task's group, or None when no work is left.

The class is plain Python; the executor makes it a Ray actor (`ray.remote`), threaded,
so that `drain` and `ack` run while `run` serves episodes.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import queue
import shutil
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mailroom.orchestrator.campaign.capacity.memory import Admission
from mailroom.orchestrator.cluster.evidence_transfer import CHUNK_BYTES, attempt_chunks
from mailroom.orchestrator.cluster.messages import (
    EventLines,
    EvidenceChunk,
    Message,
    WantsWork,
    WorkerReport,
)
from mailroom.orchestrator.cluster.staging import StagingArea
from mailroom.orchestrator.records.layout import attempt_id_of

# How long an attempt waits for the driver to record that its actor is about to see an
# observation; without that record the observation is not shown (the episode errs).
ACK_TIMEOUT_S = 120.0
# A drain's reply stays below this much evidence (bigger files come over several).
MAX_DRAIN_BYTES = 4 * CHUNK_BYTES


class DriverUnreachableError(RuntimeError):
    """The driver did not record an attempt's first disclosure in time."""


@dataclass(frozen=True)
class WorkerPlace:
    """Where a worker runs: its process, its Ray node and host, its staging folder."""

    index: int
    pid: int
    node_id: str
    hostname: str
    staging: str
    removed_stale: int


class _ForwardingMirror:
    """`EventMirror` of a cluster worker: each event line goes to the driver."""

    def __init__(self, outbox: queue.Queue[Message]) -> None:
        self._outbox = outbox
        self._tokens = itertools.count(1)
        self._waiting: dict[int, threading.Event] = {}
        self._lock = threading.Lock()

    def lines(self, attempt_id: str, lines: Sequence[str], *, disclosing: bool) -> None:
        if not disclosing:
            self._outbox.put(EventLines(attempt_id, tuple(lines)))
            return
        recorded = threading.Event()
        with self._lock:
            token = next(self._tokens)
            self._waiting[token] = recorded
        self._outbox.put(EventLines(attempt_id, tuple(lines), token))
        try:
            if not recorded.wait(ACK_TIMEOUT_S):
                raise DriverUnreachableError(
                    f"the driver did not record {attempt_id}'s first observation within "
                    f"{ACK_TIMEOUT_S:.0f} s; it is not shown"
                )
        finally:
            with self._lock:
                self._waiting.pop(token, None)

    def ack(self, token: int) -> None:
        with self._lock:
            recorded = self._waiting.get(token)
        if recorded is not None:
            recorded.set()


class ClusterWorker:
    """See the module docstring. `config` is the launch's `LaunchConfig`."""

    def __init__(self, config: Any, index: int) -> None:
        self.index = index
        launcher = config.launcher
        if launcher is not None and launcher.sandbox is not None:
            from mailroom.orchestrator.actors.sandbox_probe import probe_sandbox

            probe_sandbox()  # this node can confine actors, or the worker refuses to start
        if config.agent_cli_versions:
            from mailroom.orchestrator.actors.agent_installation import installation_difference
            from mailroom.orchestrator.cluster.errors import NodeInstallationError

            # The CLIs the actors run are this node's copy at the checkout's path: the
            # versions the run's manifest recorded, or no episode here.
            problem = installation_difference(config.agent_cli_versions)
            if problem is not None:
                raise NodeInstallationError(problem)
        self.staging = StagingArea()
        self.config = dataclasses.replace(config, run_dir=self.staging.run_dir)
        self.outbox: queue.Queue[Message] = queue.Queue()
        self.mirror = _ForwardingMirror(self.outbox)
        self._offered: queue.Queue[list[Any] | None] = queue.Queue()
        self._asked = threading.Lock()
        self._asking = False

    # --- what the driver calls ---------------------------------------------------

    def place(self) -> WorkerPlace:
        import ray

        return WorkerPlace(
            index=self.index,
            pid=os.getpid(),
            node_id=ray.get_runtime_context().get_node_id(),
            hostname=socket.gethostname(),
            staging=str(self.staging.root),
            removed_stale=len(self.staging.removed_stale),
        )

    def receive_provider_environment(self, values: dict[str, str]) -> None:
        """The launch's provider key and upstream, handed by the driver in a call of its
        own (sent to this process alone: never an actor's construction argument, which
        Ray keeps in its control store, nor an environment Ray records)."""
        from mailroom.orchestrator.gateway.server import hand_provider_environment

        hand_provider_environment(values)

    def run(self) -> None:
        """Serve episodes until the driver offers None; the staging folder goes last."""
        from mailroom.orchestrator.actors.lifetime import hold_children_in_pid_namespace
        from mailroom.orchestrator.campaign.capacity.kernel_limits import raise_open_files
        from mailroom.orchestrator.campaign.live_episodes import LiveEpisodes

        raise_open_files()  # each live episode holds about a dozen (`capacity/kernel.py`)
        # The actors go into a pid namespace whose init exits with this process (not with
        # this thread, one of Ray's), so none outlives it (`actors/lifetime.py`).
        held = hold_children_in_pid_namespace(die_with_thread=False)
        self._report(("actor_lifetime", "", 0, held.mode, held.detail))

        open_simulator = self.config.simulator
        if open_simulator is None:
            from mailroom.orchestrator.families.registry import simulator_factory

            open_simulator = simulator_factory()
        episodes = LiveEpisodes(
            self.config,
            open_simulator,
            self._report,
            Admission(self.config.memory, workers=self.config.workers),
            mirror=self.mirror,
        )
        try:
            episodes.run(self._next_work)
        finally:
            self.staging.close()

    def offer(self, group: list[Any] | None) -> None:
        with self._asked:
            self._asking = False
        self._offered.put(group)

    def ack(self, token: int) -> None:
        self.mirror.ack(token)

    def drain(self, timeout_s: float) -> list[Message]:
        """What the worker has to say, in order: waits up to `timeout_s` for a first
        message, then takes what is there, up to `MAX_DRAIN_BYTES` of evidence."""
        try:
            out: list[Message] = [self.outbox.get(timeout=timeout_s)]
        except queue.Empty:
            return []
        size = _size(out[0])
        while size < MAX_DRAIN_BYTES:
            try:
                message = self.outbox.get_nowait()
            except queue.Empty:
                break
            out.append(message)
            size += _size(message)
        return out

    # --- what the worker's own loop calls ----------------------------------------

    def _next_work(self, block: bool) -> list[Any] | None:
        try:
            return self._offered.get_nowait()
        except queue.Empty:
            pass
        with self._asked:
            if not self._asking:
                self._asking = True
                self.outbox.put(WantsWork())
        if not block:
            return []
        return self._offered.get()

    def _report(self, payload: tuple[Any, ...]) -> None:
        kind, case_id, attempt = payload[0], payload[1], payload[2]
        if kind in ("finished", "crashed"):
            attempt_id = attempt_id_of(case_id, attempt)
            directory = self.staging.attempt_dir(attempt_id)
            if directory.is_dir():
                for chunk in attempt_chunks(directory, attempt_id):
                    self.outbox.put(chunk)
                shutil.rmtree(directory, ignore_errors=True)
        self.outbox.put(WorkerReport(tuple(payload)))


def _size(message: Message) -> int:
    return len(message.data) if isinstance(message, EvidenceChunk) else 256


class RayWorkerProcess(ClusterWorker):
    """The class Ray runs, in a process of its own: set up first as `mailroom` sets up
    its own (what it creates is owner-only; the renderer is EGL, which the node's raylet
    may not have been told)."""

    def __init__(self, config: Any, index: int) -> None:
        from mailroom.orchestrator.packages.headless import configure_headless_rendering

        configure_headless_rendering()
        os.umask(0o077)
        super().__init__(config, index)
