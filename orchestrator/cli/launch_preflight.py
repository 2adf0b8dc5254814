"""Everything a launch or resume checks before anything is written or started: the plan,
the run directory and the mailbox root, the actors' memory ceiling, the capacity (one
decision, `campaign/capacity/decide.py`; a cluster is reached for it), and the actors'
launcher. `preflight` returns what it settled, or refuses."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import click
from mailroom.mailbox.endpoint import new_mailbox_root
from mailroom.orchestrator.actors.confinement import ConfinementError, ConfinementSettings
from mailroom.orchestrator.actors.launcher import ProcessLauncher, profile_launcher
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.actors.memory_cgroup import ceiling_problem
from mailroom.orchestrator.actors.profiles import LoadedProfile
from mailroom.orchestrator.campaign.capacity.decide import (
    CapacityDecision,
    CapacityRequest,
    KernelLimitsRefusal,
    decide_capacity,
)
from mailroom.orchestrator.campaign.capacity.kernel import actor_tasks
from mailroom.orchestrator.campaign.capacity.memory import MemoryPolicy
from mailroom.orchestrator.campaign.coordinator import Executor, LocalExecutor
from mailroom.orchestrator.catalog.plans import Plan
from mailroom.orchestrator.cli.exits import EXIT_CLUSTER, EXIT_USAGE
from mailroom.orchestrator.cli.launch_console import (
    print_cluster,
    print_memory_not_enforced,
    print_refusal,
)
from mailroom.orchestrator.episode.settings import RecordMode, RunSettings
from mailroom.orchestrator.gateway.prices import PriceTableError
from mailroom.orchestrator.gateway.server import GatewayError, manifest_record
from mailroom.orchestrator.sim.parked import Holding


class LaunchRefused(click.ClickException):
    """Refused before anything is written or started: `refused: message` on stderr, and
    the command ends with exit 2 (click shows it, as it shows a usage error)."""

    exit_code = EXIT_USAGE
    label = "refused"

    def show(self, file: IO[Any] | None = None) -> None:
        print_refusal(self.label, self.message)


class ClusterRefused(LaunchRefused):
    """The cluster cannot take the launch (unreachable, or too small): exit 9."""

    exit_code = EXIT_CLUSTER
    label = "cluster unavailable"


@dataclass(frozen=True)
class LaunchInputs:
    """What a launch or a resume asks to run: from its options, or a resume's run."""

    run_dir: Path
    plan_bytes: bytes
    profile: LoadedProfile
    settings: RunSettings
    actor_command: list[str] | None
    mailbox_root: Path
    workers: int
    record: RecordMode
    confinement: ConfinementSettings
    rerun_errored: bool
    as_json: bool
    slots: int | Literal["auto"] = 1
    holding: Holding = "parked"
    memory: MemoryPolicy = field(default_factory=MemoryPolicy)
    executor: str = "local"
    ray_address: str = "auto"
    require_memory_limit: bool = False


@dataclass(frozen=True)
class LaunchDecision:
    """What `preflight` settled: the plan, where the workers run and their slots, and
    the actors' launcher (None: external actors)."""

    plan: Plan
    executor: Executor
    capacity: CapacityDecision
    launcher: ProcessLauncher | None


def preflight(inputs: LaunchInputs) -> LaunchDecision:
    """The checks in the order a launch meets them; `click.UsageError` or `LaunchRefused`
    (exit 2; exit 9 when a cluster cannot take the launch) at the first that fails."""
    from mailroom.orchestrator.campaign.launch import NestedDirectoriesError, refuse_nesting
    from mailroom.orchestrator.catalog.plans import PlanError
    from mailroom.orchestrator.families.plans import parse_plan

    try:
        plan = parse_plan(inputs.plan_bytes)
    except PlanError as exc:
        raise click.UsageError(f"plan refused: {exc}") from exc
    try:
        refuse_nesting(inputs.run_dir, inputs.mailbox_root)
    except NestedDirectoriesError as exc:
        raise click.UsageError(str(exc)) from exc
    refuse_private_mailbox_root(inputs.run_dir, inputs.mailbox_root, plan)
    check_memory_ceiling(
        inputs.profile.profile.limits.memory_mb,
        spawns_actors=inputs.actor_command is not None,
        required=inputs.require_memory_limit,
        executor=inputs.executor,
    )
    executor, capacity = _capacity(inputs, len(plan.cases))
    launcher = build_launcher(
        inputs.actor_command,
        confinement=inputs.confinement,
        limits=inputs.profile.profile.limits,
        run_dir=inputs.run_dir,
        mailbox_root=inputs.mailbox_root,
        profile=inputs.profile,
    )
    return LaunchDecision(plan, executor, capacity, launcher)


def _capacity(inputs: LaunchInputs, cases: int) -> tuple[Executor, CapacityDecision]:
    """The launch's executor and slots: this machine's kernel limits checked, or a
    cluster reached and its nodes checked (exit 9 if they cannot place the workers)."""
    request = CapacityRequest(
        workers=inputs.workers,
        slots=inputs.slots,
        holding=inputs.holding,
        cases=cases,
        memory=inputs.memory,
        record_full=inputs.record == "full",
        inotify=inputs.settings.watch_mode == "inotify",
        actor_tasks=actor_tasks(inputs.profile.profile.limits),
    )
    if inputs.executor == "local":  # a Ray worker's node has limits of its own
        try:
            return LocalExecutor(), decide_capacity(request)
        except KernelLimitsRefusal as exc:
            raise LaunchRefused(str(exc)) from exc
    from mailroom.orchestrator.cluster.errors import ClusterUnavailableError
    from mailroom.orchestrator.cluster.executor import RayExecutor

    ray_executor = RayExecutor(inputs.ray_address)
    try:
        decided = ray_executor.decide_capacity(request)
    except ClusterUnavailableError as exc:
        raise ClusterRefused(str(exc)) from exc
    print_cluster(inputs.ray_address, inputs.workers, decided)
    return ray_executor, decided


def check_memory_ceiling(
    memory_mb: int | None, *, spawns_actors: bool, required: bool, executor: str
) -> None:
    """Before anything starts: whether each actor's memory ceiling is enforced by the
    kernel here, said on stderr when it is not; `--require-memory-limit` refuses then
    (exit 2)."""
    if required and executor != "local":
        problem: str | None = "it is checked on this machine, not on a cluster's nodes"
    elif required and not spawns_actors:
        problem = "external actors are started by the coordinator, not here"
    elif not spawns_actors:
        return
    else:
        problem = ceiling_problem(memory_mb)
    if problem is None:
        return
    if required:
        raise LaunchRefused(f"--require-memory-limit: {problem}")
    print_memory_not_enforced(problem)


def build_launcher(
    actor_command: list[str] | None,
    *,
    confinement: ConfinementSettings,
    limits: ActorLimits,
    run_dir: Path,
    mailbox_root: Path,
    profile: LoadedProfile,
) -> ProcessLauncher | None:
    """The run's actor launcher, checked before any worker starts (exit 2 if the sandbox
    cannot start or the command names something of the evaluator)."""
    try:
        launcher = profile_launcher(
            actor_command,
            profile=profile,
            confinement=confinement,
            limits=limits,
            run_dir=run_dir,
            mailbox_root=mailbox_root,
        )
    except ConfinementError as exc:
        raise LaunchRefused(str(exc)) from exc
    if launcher is not None and launcher.provider is not None:
        try:  # its upstream and price table, refused now rather than in a worker
            manifest_record(launcher.provider.declaration)
        except (GatewayError, PriceTableError) as exc:
            raise LaunchRefused(str(exc)) from exc
    return launcher


@contextlib.contextmanager
def own_mailbox_root(given: Path | None) -> Iterator[Path]:
    """The mailbox root given, or a fresh one that is removed again if it is still empty
    when the command ends (a refused launch leaves nothing behind)."""
    if given is not None:
        yield given
        return
    root = new_mailbox_root()
    try:
        yield root
    finally:
        with contextlib.suppress(OSError):
            root.rmdir()  # only an empty folder: endpoints stay for the audit


def refuse_private_mailbox_root(run_dir: Path, mailbox_root: Path, plan: Plan) -> None:
    """Every endpoint path lies under the mailbox root and is handed to an actor: a root
    whose path names the run, a case, a suite, a task, a seed, a date or the benchmark is
    refused (exit 2) before anything is made, naming the word."""
    from mailroom.orchestrator.audit.patterns import launch_identifiers, path_disclosures
    from mailroom.orchestrator.records.run_directory import RunDirectory

    run = RunDirectory(run_dir)
    manifest = run.read_manifest() if run.exists() else None
    identifiers = launch_identifiers(
        run_id=str(manifest["run_id"]) if manifest else run_dir.resolve().name,
        run_dir=run_dir,
        cases=plan.to_cases(),
        created_at=str(manifest["volatile"]["created_at"]) if manifest else None,
    )
    found = path_disclosures(mailbox_root, identifiers)
    if found:
        named = "; ".join(f"{kind.replace('_', ' ')} in {shown!r}" for kind, shown in found)
        raise LaunchRefused(
            f"the mailbox root {mailbox_root} is part of every endpoint path an actor is "
            f"handed, and it names what an actor must not learn ({named}): choose "
            "another --mailbox-root (the default is a fresh random folder)"
        )
