"""A launch or a resume of a run, start to finish, apart from how the CLI shows it.

Under the run's lock: the manifest is written (a first launch) or checked against the
run's own (a resume: a conflicting one is refused); attempts an actor may have seen
are recorded as interrupted, never silently re-run; the scheduled work runs in worker
processes or on a cluster (`Executor`); and every attempt that ended without a result is
recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mailroom.orchestrator.actors.confinement import ConfinementSettings
from mailroom.orchestrator.actors.launcher import ProcessLauncher
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.actors.profiles import declared_instructions, instructions_for_protocol
from mailroom.orchestrator.campaign.capacity.memory import MemoryPolicy
from mailroom.orchestrator.campaign.coordinator import (
    Executor,
    LaunchConfig,
    Listener,
    LocalExecutor,
    WorkOutcome,
    schedule,
)
from mailroom.orchestrator.campaign.interrupted import record_interrupted
from mailroom.orchestrator.campaign.manifest import build_manifest, check_compatible
from mailroom.orchestrator.campaign.stopping import StopRequest
from mailroom.orchestrator.catalog.plans import Plan
from mailroom.orchestrator.episode.settings import RecordMode, RunSettings
from mailroom.orchestrator.families.kept import keep_run_catalog, pin_run_catalog
from mailroom.orchestrator.families.registry import family, family_protocol, simulator_factory
from mailroom.orchestrator.gateway.server import manifest_record
from mailroom.orchestrator.records.run_directory import RunDirectory
from mailroom.orchestrator.sim.base import SimulatorFactory
from mailroom.orchestrator.sim.parked import Holding

SEEN_THEN_STOPPED = (
    "the orchestrator stopped during this attempt after the actor had been shown "
    "observations; kept, never silently re-run"
)


def stopped_reason(signal_name: str) -> str:
    """Why an attempt a person's stop cut short has an errored result."""
    return (
        f"the launch was stopped ({signal_name}) during this attempt after the actor had "
        "been shown observations; kept, never silently re-run"
    )


class NestedDirectoriesError(ValueError):
    """The run directory and the mailbox root contain one another."""


@dataclass(frozen=True)
class CampaignRequest:
    """Everything a launch or a resume needs, checked by its caller (plan, profile,
    settings, launcher) before anything is written."""

    run_dir: Path
    plan: Plan
    plan_bytes: bytes
    profile: str
    declaration: dict[str, Any]
    settings: RunSettings
    actor_command: list[str] | None
    launcher: ProcessLauncher | None
    limits: ActorLimits
    mailbox_root: Path
    workers: int
    record: RecordMode
    confinement: ConfinementSettings
    rerun_errored: bool = False
    simulator: SimulatorFactory | None = None
    # Live episodes per worker, and the memory their admission keeps free. Neither
    # changes what an episode records: they are on the launch's event, not the manifest.
    slots: int = 1
    memory: MemoryPolicy = field(default_factory=MemoryPolicy)
    # How each worker holds its simulators (`sim.parked`): on the launch's event; each
    # result says how its own episode's simulator was held.
    holding: Holding = "parked"
    # Where the work runs (this machine, or a Ray cluster): on the launch's event too.
    executor: Executor = field(default_factory=LocalExecutor)
    # The folder the profile was loaded from (a resume copies its programs from there).
    profile_dir: Path | None = None
    # Set by a person's Ctrl-C or SIGTERM: the work stops, live attempts stay unrecorded.
    stop: StopRequest = field(default_factory=StopRequest)


@dataclass(frozen=True)
class LastLaunch:
    """How the run's last launch or resume ran: what a resume reuses by default."""

    slots: int = 1
    executor: str = "local"
    ray_address: str | None = None
    # Launches before simulators were parked held one per live episode.
    holding: Holding = "dedicated"
    profile_dir: Path | None = None


def last_launch(run: RunDirectory) -> LastLaunch:
    """The last `launched`/`resumed` event's slots and executor (1 and local before
    either was recorded)."""
    for event in reversed(run.events()):
        if event.get("event") in ("launched", "resumed"):
            slots = event.get("slots", 1)
            executor = event.get("executor", "local")
            address = event.get("ray_address")
            folder = event.get("profile_dir")
            holding = event.get("holding")
            return LastLaunch(
                holding="parked" if holding == "parked" else "dedicated",
                slots=slots if isinstance(slots, int) and slots >= 1 else 1,
                executor=executor if executor in ("local", "ray") else "local",
                ray_address=address if isinstance(address, str) else None,
                profile_dir=Path(folder) if isinstance(folder, str) else None,
            )
    return LastLaunch()


def refuse_nesting(run_dir: Path, mailbox_root: Path) -> None:
    """Everything under the mailbox root is visible to actors: the run is never there."""
    a, b = run_dir.resolve(), mailbox_root.resolve()
    if a.is_relative_to(b) or b.is_relative_to(a):
        raise NestedDirectoriesError(
            "the run directory and the mailbox root must not contain one another: "
            "everything under the mailbox root is visible to actors"
        )


def _manifest(request: CampaignRequest, run: RunDirectory) -> dict[str, Any]:
    sandbox = None if request.launcher is None else request.launcher.sandbox
    provider = None if request.launcher is None else request.launcher.provider
    gateway, upstream = (None, None) if provider is None else manifest_record(provider.declaration)
    return build_manifest(
        run_id=run.read_manifest()["run_id"] if run.exists() else request.run_dir.name,
        plan_sha256=request.plan.plan_sha256,
        plan_kind=request.plan.kind,
        n_cases=len(request.plan.cases),
        profile_name=request.profile,
        profile_declaration=request.declaration,
        settings=request.settings,
        actor_command=request.actor_command,
        record=request.record,
        run_dir=request.run_dir,
        mailbox_root=request.mailbox_root,
        workers=request.workers,
        confinement=request.confinement,
        sandbox_tool=None if sandbox is None else sandbox.tool,
        benchmark=request.plan.benchmark,
        programs=None if request.launcher is None else request.launcher.programs(),
        provider_gateway=gateway,
        provider_upstream=upstream,
    )


def run_campaign(
    request: CampaignRequest, listener: Listener, on_scheduled: Callable[[int], None]
) -> WorkOutcome:
    """Run what the run still needs. `on_scheduled` hears how many attempts will run,
    before the first starts; `listener` hears each worker report.

    Raises `ManifestConflictError` (a resume with other settings), `RunLockedError`
    (another launch holds the run) and `OSError` (the run directory failed).
    """
    refuse_nesting(request.run_dir, request.mailbox_root)
    run = RunDirectory(request.run_dir)
    with run.lock():
        manifest = _manifest(request, run)
        live = {
            "slots": request.slots,
            "holding": request.holding,
            "memory_margin": request.memory.margin,
            "max_memory_mb": request.memory.max_memory_mb,
            **request.executor.describe(),
            "profile_dir": None if request.profile_dir is None else str(request.profile_dir),
        }
        if run.exists():
            check_compatible(run.read_manifest(), manifest)
            run.event(
                "resumed",
                volatile=manifest["volatile"],
                rerun_errored=request.rerun_errored,
                **live,
            )
        else:
            run.write_manifest(manifest)
            run.plan_path.write_bytes(request.plan_bytes)
            # A catalog made from a local copy (every file's hash, cell and match, the
            # revision) is kept with the run: the manifest and the plan name it by hash.
            keep_run_catalog(run.root, request.plan.benchmark)
            run.event("launched", volatile=manifest["volatile"], **live)
        # This process and every worker resolve cases against the kept catalog, not the
        # copy as it is by then: a file added or changed mid-run cannot move a case. The
        # workers get it inside their work (a Ray worker on another node has no copy).
        kept = pin_run_catalog(run.root)
        if kept is not None:
            family(request.plan.benchmark).check_local_copy(
                c.task_index for c in request.plan.cases
            )
        planned = schedule(request.plan.to_cases(), run, rerun_errored=request.rerun_errored)
        for seen in planned.interrupted:
            record_interrupted(run, seen.attempt_id, reason=SEEN_THEN_STOPPED)
        for unseen in planned.restarted:
            run.event("attempt_abandoned_before_delivery", attempt_id=unseen.attempt_id)
        if request.rerun_errored:
            for item in planned.work:
                if item.attempt > 1:
                    run.event("rerun_errored", case_id=item.case.case_id, attempt=item.attempt)
        config = LaunchConfig(
            run_dir=request.run_dir,
            mailbox_root=request.mailbox_root,
            settings=request.settings,
            record=request.record,
            launcher=request.launcher,
            limits=request.limits,
            simulator=request.simulator or simulator_factory(request.plan.benchmark),
            slots=request.slots,
            holding=request.holding,
            memory=request.memory,
            instructions=instructions_for_protocol(
                declared_instructions(request.declaration),
                family_protocol(request.plan.benchmark).version,
            ),
            kept=kept,
            agent_cli_versions={
                name: version
                for name, version in manifest["environment"]["packages"].items()
                if name.startswith("npm:")
            },
        )
        on_scheduled(len(planned.work))
        stop = request.stop
        outcome = request.executor.run(config, planned.work, request.workers, listener, stop)
        if stop.requested:
            # Each attempt the stop cut short after its actor saw an observation is
            # recorded now, with the reason; one that saw nothing is left for a resume
            # to run (schedule's rule, the same as a resume's).
            cut = schedule(request.plan.to_cases(), run).interrupted
            for seen in cut:
                record_interrupted(run, seen.attempt_id, reason=stopped_reason(stop.name()))
            run.event("launch_stopped", signal=stop.name(), interrupted=len(cut))
        else:
            run.event("launch_finished")
    return outcome
