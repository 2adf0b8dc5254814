"""One blinded episode end to end: endpoint, actor, runner, evidence, result."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from mailroom.mailbox.endpoint import create_endpoint
from mailroom.mailbox.inbox_hub import InboxHub
from mailroom.orchestrator.actors.confinement import ConfinementSettings
from mailroom.orchestrator.actors.instructions import guide_handed, render_instructions
from mailroom.orchestrator.actors.launcher import ActorHandle, ActorLauncher
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.actors.process import ActorProcess
from mailroom.orchestrator.actors.profiles import (
    DEFAULT_INSTRUCTIONS,
    actor_instructions_template,
    instructions_version_of,
)
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.episode.evidence import EpisodeEvidence, EventMirror
from mailroom.orchestrator.episode.provider_gate import (
    GatedTransport,
    budget_check,
    close_gate,
    open_gate,
)
from mailroom.orchestrator.episode.runner import (
    Ending,
    EpisodeRequest,
    EpisodeRunner,
    EpisodeSteps,
    FrameSink,
    drive,
)
from mailroom.orchestrator.episode.settings import RecordMode, RunSettings
from mailroom.orchestrator.episode.video import EpisodeVideo
from mailroom.orchestrator.families.registry import family, reference_horizon
from mailroom.orchestrator.gateway.server import EpisodeGate
from mailroom.orchestrator.records.layout import ENDPOINT_FILE, LAUNCH_MESSAGE_FILE, RunPaths
from mailroom.orchestrator.records.result import Enforcement, EpisodeResult, ProviderUsage
from mailroom.orchestrator.sim.base import Simulator
from mailroom.orchestrator.transport.base import (
    ActorCheck,
    ActorGuard,
    PolicyFailed,
    PollableTransport,
)
from mailroom.orchestrator.transport.mailbox import MailboxTransport
from mailroom.orchestrator.transport.policy import Policy, PolicyTransport

MAX_USAGE_ENTRIES = 1_000_000


def scratch_quota(mailbox: MailboxTransport, limits: ActorLimits) -> ActorCheck:
    """What the actor keeps in its endpoint must stay within the declared quota."""
    max_files = limits.scratch_quota_files
    max_bytes = None if limits.scratch_quota_mb is None else limits.scratch_quota_mb << 20

    def check() -> PolicyFailed | None:
        if max_files is None and max_bytes is None:
            return None
        usage = mailbox.usage((max_files or 1_000_000) + 1)
        too_many = usage.truncated or (max_files is not None and usage.files > max_files)
        too_big = max_bytes is not None and max(usage.bytes, usage.allocated_bytes) > max_bytes
        if too_many or too_big:
            return PolicyFailed(
                "scratch_quota_exceeded",
                f"the actor keeps {usage.files} entries and {usage.bytes} bytes in its "
                f"endpoint; the profile allows {max_files} entries and {max_bytes} bytes",
            )
        return None

    return check


def memory_limit(actor: ActorHandle) -> list[ActorCheck]:
    """The kernel's OOM killer ended a process of the actor's memory cgroup: the actor
    passed its ceiling (read from the cgroup's count, not guessed from an exit signal)."""
    if not isinstance(actor, ActorProcess) or actor.memory is None:
        return []
    cgroup = actor.memory

    def check() -> PolicyFailed | None:
        kills = cgroup.oom_kills()
        if kills == 0:
            return None
        return PolicyFailed(
            "memory_limit",
            f"the kernel's OOM killer ended {kills} process(es) of the actor, which passed "
            f"its memory ceiling of {cgroup.limit_bytes >> 20} MiB (its /tmp and /dev/shm "
            "count)",
        )

    return [check]


@dataclass(frozen=True)
class _Prepared:
    runner: EpisodeRunner
    request: EpisodeRequest
    evidence: EpisodeEvidence


def _prepare(
    case: Case,
    attempt: int,
    settings: RunSettings,
    adapter: Simulator,
    run_dir: Path,
    confinement: ConfinementSettings,
    instructions: str,
    video: FrameSink | None = None,
    mirror: EventMirror | None = None,
) -> _Prepared:
    """Checks first (nothing is created if the configuration is wrong), then evidence."""
    runner = EpisodeRunner(adapter, settings, video)
    horizon = reference_horizon(case.suite).controls
    runner.check_configuration(horizon)
    request = EpisodeRequest(
        attempt_id=case.attempt_id(attempt),
        case_id=case.case_id,
        identity=adapter.resolve_task(case.suite, case.task_index, case.task_order_index),
        init_state_index=case.init_state_index,
        seed=case.seed,
        reference_horizon=horizon,
        confinement=confinement.record(),
        instructions_version=instructions,
    )
    evidence = EpisodeEvidence(RunPaths(run_dir).attempt(request.attempt_id).root, mirror)
    return _Prepared(runner, request, evidence)


def run_blinded_episode(
    case: Case,
    *,
    attempt: int,
    settings: RunSettings,
    adapter: Simulator,
    run_dir: Path,
    mailbox_root: Path,
    launch_actor: ActorLauncher | None,
    on_launch_message: Callable[[str], None] | None = None,
    record: RecordMode = "full",
    limits: ActorLimits | None = None,
    instructions: str = DEFAULT_INSTRUCTIONS,
) -> EpisodeResult:
    """Run `case` against a fresh actor through a fresh opaque endpoint, alone.

    With no launcher, an external actor is handed the launch message by the coordinator
    (`on_launch_message` receives it; it is also kept privately) and the attempt's
    confinement is `external`. `record="full"` adds an MP4 per camera of every executed
    control (cameras then render every control).
    """
    return drive(
        blinded_episode(
            case,
            attempt=attempt,
            settings=settings,
            adapter=adapter,
            run_dir=run_dir,
            mailbox_root=mailbox_root,
            launch_actor=launch_actor,
            on_launch_message=on_launch_message,
            record=record,
            limits=limits,
            instructions=instructions,
        )
    )


def blinded_episode(
    case: Case,
    *,
    attempt: int,
    settings: RunSettings,
    adapter: Simulator,
    run_dir: Path,
    mailbox_root: Path,
    launch_actor: ActorLauncher | None,
    on_launch_message: Callable[[str], None] | None = None,
    record: RecordMode = "full",
    limits: ActorLimits | None = None,
    hub: InboxHub | None = None,
    mirror: EventMirror | None = None,
    instructions: str = DEFAULT_INSTRUCTIONS,
) -> EpisodeSteps:
    """`run_blinded_episode` as a generator that yields each wait (see `runner.drive`).

    With a `hub`, the inbox is watched by the hub's one reader rather than a thread of
    its own: a worker serving several live episodes waits on the hub for all of them.
    A `mirror` hears each line of the attempt's event log as it is written.
    `instructions` names the version of the actor instructions handed to the actor
    (`"v2"`, or its file `"prompts/actor_instructions_v2.txt"`); its result records it.
    """
    version = instructions_version_of(instructions)
    confinement = (
        ConfinementSettings(mode="external") if launch_actor is None else launch_actor.confinement
    )
    cameras = family(case.benchmark).observation_spec.cameras
    video = EpisodeVideo(RunPaths(run_dir).attempt(case.attempt_id(attempt)).root, cameras)
    prepared = _prepare(
        case,
        attempt,
        settings,
        adapter,
        run_dir,
        confinement,
        version,
        video if record == "full" else None,
        mirror,
    )
    adapter.record_frames = record == "full"
    evidence = prepared.evidence
    identity = None if launch_actor is None else launch_actor.identity()
    endpoint = create_endpoint(mailbox_root, actor_gid=None if identity is None else identity.gid)
    template = actor_instructions_template(version)
    instructions = render_instructions(
        str(endpoint.root),
        template=template,
        actor_guide=guide_handed(template, family(case.benchmark).actor_guide),
    )
    # The endpoint-to-case mapping lives only here, in the private run directory.
    evidence.write_private(
        ENDPOINT_FILE,
        {"endpoint": str(endpoint.root), "token": endpoint.token, "case": case.model_dump()},
    )
    evidence.write_private(
        LAUNCH_MESSAGE_FILE, {"instructions": instructions, "instructions_version": version}
    )
    mailbox = MailboxTransport(
        endpoint,
        evidence,
        watch_mode=settings.watch_mode,
        keep_images=record == "full",
        outbox_durability=settings.outbox_durability,
        hub=hub,
    )
    checks = [scratch_quota(mailbox, limits or ActorLimits())]
    transport: PollableTransport = ActorGuard(mailbox, lambda: True, checks)
    actor: ActorHandle | None = None
    gate: EpisodeGate | None = None
    # An actor not started here (an external one) was held to nothing by the kernel.
    request = prepared.request
    try:
        if launch_actor is not None and identity is not None:
            actor = launch_actor.start(
                endpoint, instructions, identity, evidence.paths.actor_output
            )
            started = actor.description()
            evidence.event("actor_started", **started)
            request = replace(request, enforcement=Enforcement.of_actor(started))
            # Its model requests through the gateway, metered (`provider_gate.py`).
            gate = open_gate(launch_actor, actor, evidence.paths.provider_requests)
            guarded = [*checks, *memory_limit(actor)]
            if gate is not None:
                guard = ActorGuard(mailbox, actor.alive, [*guarded, budget_check(gate)])
                transport = GatedTransport(guard, gate)
            else:
                transport = ActorGuard(mailbox, actor.alive, guarded)
        elif on_launch_message is not None:
            on_launch_message(instructions)
        evidence.reserve_room()
        result = yield from prepared.runner.steps(request, transport, evidence)
        yield Ending(result)  # the simulator is free; what follows does not touch it
        if record == "full":
            videos = video.finish()
            evidence.event("videos_written", videos={c: v.document() for c, v in videos.items()})
    finally:
        video.abort()
        if actor is not None:
            status = actor.stop()
            # What it left in its endpoint once it ended (the quota is checked while it
            # runs; this records what it wrote between the last check and its end).
            left = mailbox.usage(MAX_USAGE_ENTRIES)
            evidence.event(
                "actor_stopped",
                exit_status=status,
                endpoint_usage={
                    "entries": left.files,
                    "bytes": left.bytes,
                    "allocated_bytes": left.allocated_bytes,
                    "truncated": left.truncated,
                },
                **actor.stop_details(),
            )
        if gate is not None:
            metered = ProviderUsage.model_validate(close_gate(gate))
        if identity is not None:
            identity.release()  # after the actor's stop and sweep; if it never started
        mailbox.sweep_late()  # what the actor wrote between the close and its end
        endpoint.held.close()
        evidence.close()
    if gate is not None:
        result = result.model_copy(update={"usage": metered})
    evidence.write_result(result)
    return result


def run_in_process_episode(
    case: Case,
    *,
    attempt: int,
    settings: RunSettings,
    adapter: Simulator,
    run_dir: Path,
    policy: Policy,
    instructions: str = DEFAULT_INSTRUCTIONS,
) -> EpisodeResult:
    """The same episode with an in-process `Policy.act` instead of a mailbox actor.

    The policy reads no instructions: `instructions` is only the version its result
    records, so that it compares with a mailbox actor's episode handed that version.
    """
    adapter.record_frames = False
    # The policy runs inside the orchestrator's own process: nothing confines it.
    prepared = _prepare(
        case,
        attempt,
        settings,
        adapter,
        run_dir,
        ConfinementSettings(mode="none"),
        instructions_version_of(instructions),
    )
    try:
        transport = PolicyTransport(policy, prepared.evidence)
        prepared.evidence.reserve_room()
        result = prepared.runner.run(prepared.request, transport, prepared.evidence)
    finally:
        prepared.evidence.close()
    prepared.evidence.write_result(result)
    return result
