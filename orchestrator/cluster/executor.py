"""The Ray executor: a campaign's work on a Ray cluster, its books on the driver.

Each Ray actor is a `ClusterWorker` with its slots on one node, placed by the custom
resource `mailroom_slot` (a worker of S slots takes S of its node's) and by the memory
its live episodes are estimated to need (`campaign/capacity/placement.py`). The driver
hands out one task's group at a time to whichever worker asks, writes every attempt's
mirrored event log and finished evidence into its own run directory
(`evidence_transfer`), and keeps the books as the local executor does:

- Ray never retries anything: actors have no restarts, tasks no retries. A lost worker
  (its process or node died) leaves each of its live attempts recorded `worker_lost`
  from the events the driver holds; the work it had not started goes to the others.
- An attempt is complete only once the driver wrote its `result.json`.
- A killed driver takes its workers with it (Ray ends a job's actors with its driver);
  `mailroom resume` with a new driver finds in the run directory what each attempt's
  actor may have seen, as after a local launch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import socket
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mailroom.orchestrator.campaign.capacity.decide import (
    CapacityDecision,
    CapacityRequest,
    PlacementRefusal,
    decide_capacity,
)
from mailroom.orchestrator.campaign.capacity.placement import SLOT_RESOURCE as SLOT_RESOURCE
from mailroom.orchestrator.campaign.capacity.placement import NodeCapacity, worker_memory_mb
from mailroom.orchestrator.campaign.coordinator import (
    LaunchConfig,
    Listener,
    Work,
    WorkOutcome,
    group_by_task,
    record_lost,
)
from mailroom.orchestrator.campaign.stopping import StopRequest
from mailroom.orchestrator.cluster.errors import ClusterUnavailableError
from mailroom.orchestrator.cluster.evidence_transfer import DriverEvidence, EvidencePathError
from mailroom.orchestrator.cluster.messages import (
    EventLines,
    EvidenceChunk,
    Message,
    WantsWork,
    WorkerReport,
)
from mailroom.orchestrator.cluster.worker import RayWorkerProcess, WorkerPlace
from mailroom.orchestrator.records.layout import attempt_id_of
from mailroom.orchestrator.records.run_directory import RunDirectory

DRAIN_S = 0.5
WAIT_S = 1.0
# How long workers may take to be placed and start (Ray may have to start processes).
START_TIMEOUT_S = 300.0
END_TIMEOUT_S = 90.0
MAX_CONCURRENCY = 8
CONNECT_TIMEOUT_S = 5.0


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ClusterUnavailableError(
            "Ray is not installed: install mailroom's extra, pip install 'mailroom[ray]'"
        ) from exc
    return ray


def _reachable(ray: Any, address: str) -> str:
    """`host:port` of the cluster's head, which answers now (Ray itself would retry an
    unreachable address for minutes)."""
    try:
        from ray._private.services import canonicalize_bootstrap_address_or_die

        resolved = str(canonicalize_bootstrap_address_or_die(address))
    except Exception as exc:  # ConnectionError, ValueError, or Ray's own layout moved
        raise ClusterUnavailableError(
            f"no Ray cluster found at {address!r} (start one with `ray start --head`, or "
            f"name its head with --ray-address HOST:PORT): {exc}"
        ) from exc
    host, _, port = resolved.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except (OSError, ValueError) as exc:
        raise ClusterUnavailableError(
            f"the Ray cluster's head at {resolved} does not answer: {exc}"
        ) from exc
    return resolved


@dataclass(frozen=True)
class RayExecutor:
    """`--executor ray`: `address` is Ray's (`auto`: the cluster this machine belongs to)."""

    address: str = "auto"

    def describe(self) -> dict[str, Any]:
        return {"executor": "ray", "ray_address": self.address}

    def connect(self) -> Any:
        ray = _ray()
        if not ray.is_initialized():
            resolved = _reachable(ray, self.address)
            try:
                ray.init(address=resolved, logging_level=logging.WARNING, log_to_driver=False)
            except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError
                raise ClusterUnavailableError(f"no Ray cluster at {self.address!r}: {exc}") from exc
        return ray

    def nodes(self) -> list[NodeCapacity]:
        ray = self.connect()
        out: list[NodeCapacity] = []
        for node in ray.nodes():
            if not node.get("Alive"):
                continue
            resources = node.get("Resources", {})
            out.append(
                NodeCapacity(
                    node_id=str(node.get("NodeID", "")),
                    address=str(node.get("NodeManagerAddress", "")),
                    slots=float(resources.get(SLOT_RESOURCE, 0.0)),
                    memory_mb=float(resources.get("memory", 0.0)) / 2**20,
                )
            )
        return out

    def decide_capacity(self, request: CapacityRequest) -> CapacityDecision:
        """The launch's slots on this cluster (`auto`: the most its nodes place), refused
        before anything is written if its nodes cannot place the workers."""
        try:
            return decide_capacity(request, nodes=self.nodes())
        except PlacementRefusal as exc:
            raise ClusterUnavailableError(str(exc)) from exc

    def run(
        self,
        config: LaunchConfig,
        work: Sequence[Work],
        workers: int,
        listener: Listener,
        stop: StopRequest | None = None,
    ) -> WorkOutcome:
        stop = stop or StopRequest()
        if stop.requested:
            return WorkOutcome(lost=[], unrecorded=[])
        return _Driver(self.connect(), config, work, workers, listener, stop).run()


@dataclass
class _Worker:
    index: int
    handle: Any
    place: WorkerPlace | None = None
    run_ref: Any = None
    drain_ref: Any = None
    assigned: list[Work] = field(default_factory=list)  # offered, not started
    live: set[tuple[str, int]] = field(default_factory=set)
    hungry: bool = False
    alive: bool = True
    run_ended: bool = False

    def describe(self) -> str:
        where = "" if self.place is None else f" on {self.place.hostname} (pid {self.place.pid})"
        return f"Ray worker {self.index}{where}"


class _Driver:
    def __init__(
        self,
        ray: Any,
        config: LaunchConfig,
        work: Sequence[Work],
        workers: int,
        listener: Listener,
        stop: StopRequest,
    ) -> None:
        self.ray = ray
        self.listener = listener
        self.stop = stop
        self.run_dir = RunDirectory(config.run_dir)
        self.evidence = DriverEvidence(self.run_dir)
        groups = group_by_task(work, at_least=workers)
        self.queue: deque[list[Work]] = deque(groups)
        self.n = max(1, min(workers, len(groups)))
        # On a cluster, each worker's memory cap is its own (its node's memory).
        self.config = dataclasses.replace(config, workers=1)
        self.remaining = len(work)
        self.lost: list[tuple[str, int, str]] = []
        self.workers: list[_Worker] = []

    # --- the run ----------------------------------------------------------------

    def run(self) -> WorkOutcome:
        """Stopped (`StopRequest`), the workers are killed at once: the attempts they had
        live are left without a result, for a resume."""
        try:
            self._start_workers()
            while self.remaining > 0 and any(w.alive for w in self.workers):
                if self.stop.requested:
                    break
                self._step()
            if self.stop.requested:
                self.listener("stopping", (self.stop.name(),))
            else:
                self._end_workers()
        finally:
            for worker in self.workers:
                self._kill(worker)
        return record_lost(self.run_dir, self.lost)

    def _provider_environment(self) -> dict[str, str]:
        """The provider key and upstream the workers' gateways need, from this launch's
        environment (empty when the run's actors use no gateway)."""
        launcher = self.config.launcher
        provider = None if launcher is None else launcher.provider
        if provider is None:
            return {}
        from mailroom.orchestrator.gateway.server import provider_environment

        return provider_environment(provider.declaration)

    def _start_workers(self) -> None:
        slots = max(1, int(self.config.slots))
        remote = self.ray.remote(RayWorkerProcess).options(
            num_cpus=1,
            resources={SLOT_RESOURCE: slots},
            memory=int(worker_memory_mb(slots, self.config.holding) * 2**20),
            max_restarts=0,
            max_task_retries=0,
            max_concurrency=MAX_CONCURRENCY,
            scheduling_strategy="SPREAD",
        )
        self.workers = [_Worker(i, remote.remote(self.config, i)) for i in range(self.n)]
        places = {w.handle.place.remote(): w for w in self.workers}
        ready, pending = self.ray.wait(
            list(places), num_returns=len(places), timeout=START_TIMEOUT_S
        )
        handed = self._provider_environment()
        for ref in ready:
            worker = places[ref]
            try:
                worker.place = self.ray.get(ref)
                if handed:
                    self.ray.get(worker.handle.receive_provider_environment.remote(handed))
            except Exception as exc:  # the worker refused to start on its node
                worker.alive = False
                self.listener("worker_refused", (worker.index, _reason(exc)))
                continue
            self.listener("worker_ready", (worker.place,))
        for ref in pending:
            places[ref].alive = False
            self.listener(
                "worker_refused",
                (places[ref].index, f"not placed within {START_TIMEOUT_S:.0f} s"),
            )
        if not any(w.alive for w in self.workers):
            raise ClusterUnavailableError("no Ray worker started; see the reasons above")
        for worker in self.workers:
            if worker.alive:
                worker.run_ref = worker.handle.run.remote()
                worker.drain_ref = worker.handle.drain.remote(DRAIN_S)

    def _step(self) -> None:
        refs: dict[Any, tuple[_Worker, str]] = {}
        for worker in self.workers:
            if worker.alive:
                refs[worker.drain_ref] = (worker, "drain")
                if not worker.run_ended:
                    refs[worker.run_ref] = (worker, "run")
        ready, _ = self.ray.wait(list(refs), num_returns=1, timeout=WAIT_S)
        for ref in ready:
            worker, kind = refs[ref]
            if not worker.alive:
                continue
            if kind == "run":
                self._run_ended(worker, ref)
            else:
                self._drained(worker, ref)

    def _drained(self, worker: _Worker, ref: Any) -> None:
        try:
            messages: list[Message] = self.ray.get(ref)
        except Exception as exc:  # RayActorError: its process or node is gone
            self._worker_lost(worker, _reason(exc))
            return
        for message in messages:
            self._handle(worker, message)
        if worker.run_ended and not messages:
            self._worker_lost(worker, "its loop ended with episodes unfinished")
            return
        if worker.alive:
            worker.drain_ref = worker.handle.drain.remote(DRAIN_S)

    def _run_ended(self, worker: _Worker, ref: Any) -> None:
        """Its loop ended (it raised, or the driver's None reached it): what it still
        has to say is drained before its live attempts count as lost."""
        worker.run_ended = True
        try:
            self.ray.get(ref)
        except Exception as exc:
            self.listener("worker_failed", (worker.index, _reason(exc)))

    def _handle(self, worker: _Worker, message: Message) -> None:
        if isinstance(message, EventLines):
            try:
                self.evidence.events(message)
            except EvidencePathError as exc:  # never acknowledged: nothing is shown
                self.listener("evidence_refused", (message.attempt_id, str(exc)))
                return
            if message.token is not None:
                worker.handle.ack.remote(message.token)
        elif isinstance(message, EvidenceChunk):
            try:
                self.evidence.chunk(message)
            except EvidencePathError as exc:
                self.evidence.discard(message.attempt_id)
                self.listener("evidence_refused", (message.attempt_id, str(exc)))
        elif isinstance(message, WantsWork):
            worker.hungry = True
            self._feed()
        elif isinstance(message, WorkerReport):
            self._report(worker, message.payload)

    def _report(self, worker: _Worker, payload: tuple[Any, ...]) -> None:
        kind, case_id, attempt, *rest = payload
        key = (case_id, attempt)
        if kind == "started":
            worker.assigned = [w for w in worker.assigned if (w.case.case_id, w.attempt) != key]
            worker.live.add(key)
        elif kind in ("finished", "crashed"):
            worker.live.discard(key)
            self.remaining -= 1
            attempt_paths = self.run_dir.paths.attempt(attempt_id_of(case_id, attempt))
            if kind == "crashed":
                self.lost.append((case_id, attempt, str(rest[0])))
            elif not attempt_paths.result.is_file():
                kind = "crashed"
                refused = self.evidence.refusal(attempt_id_of(case_id, attempt))
                reason = (
                    "its evidence did not reach the driver's run directory"
                    if refused is None
                    else f"the driver refused its evidence: {refused}"
                )
                self.lost.append((case_id, attempt, reason))
                payload = (kind, case_id, attempt, reason)
        self.listener(kind, tuple(payload[1:]))

    def _feed(self) -> None:
        for worker in self.workers:
            if worker.alive and worker.hungry and self.queue:
                group = self.queue.popleft()
                worker.hungry = False
                worker.assigned.extend(group)
                worker.handle.offer.remote(group)

    def _worker_lost(self, worker: _Worker, reason: str) -> None:
        worker.alive = False
        for case_id, attempt in sorted(worker.live):
            self.evidence.discard(attempt_id_of(case_id, attempt))
            self.lost.append((case_id, attempt, f"{worker.describe()} was lost: {reason}"))
            self.remaining -= 1
        worker.live.clear()
        if worker.assigned:  # not started anywhere: the others run it
            self.queue.extendleft(reversed(group_by_task(worker.assigned)))
            worker.assigned = []
        self.listener("worker_lost", (worker.index, reason))
        self._kill(worker)
        self._feed()

    def _end_workers(self) -> None:
        """No work is left: each worker's loop ends (its idle simulators closed, its
        staging folder removed) before it is killed."""
        alive = [w for w in self.workers if w.alive]
        for worker in alive:
            worker.handle.offer.remote(None)
        deadline = time.monotonic() + END_TIMEOUT_S
        for worker in alive:
            if worker.run_ended:
                continue
            with contextlib.suppress(Exception):
                self.ray.get(worker.run_ref, timeout=max(0.1, deadline - time.monotonic()))

    def _kill(self, worker: _Worker) -> None:
        with contextlib.suppress(Exception):  # already gone
            self.ray.kill(worker.handle, no_restart=True)


def _reason(exc: BaseException) -> str:
    """The error's first line; for a worker whose start raised (its trial sandbox, say),
    the exception it raised, which Ray puts last, after the traceback."""
    text = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    said = text[0] if text else ""
    if getattr(exc, "actor_init_failed", False) and len(text) > 1:
        said = f"its start raised {text[-1]}"
    return f"{type(exc).__name__}: {said}"[:500]
