"""One blinded episode end to end: endpoint, actor, runner, evidence, result."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from mailroom.mailbox.endpoint import Endpoint, create_endpoint

from .actor_process import ActorProcess, render_command
from .cases import Case
from .catalog import reference_horizon
from .evidence import EpisodeEvidence
from .instructions import render_instructions
from .libero_adapter import CAMERAS, LiberoAdapter, resolve_task
from .mailbox_transport import MailboxTransport
from .policy_transport import Policy, PolicyTransport
from .results import EpisodeResult
from .runner import EpisodeRequest, EpisodeRunner, FrameSink
from .settings import RecordMode, RunSettings
from .transport import ActorLivenessGuard, Transport
from .video import EpisodeVideo


class ActorHandle(Protocol):
    def stop(self) -> int | None: ...

    def alive(self) -> bool: ...

    def description(self) -> dict[str, object]:
        """What the actor was given (argv, environment, working directory), for audits."""
        ...


# Starts one fresh actor for one endpoint, given the rendered instructions.
ActorLauncher = Callable[[Endpoint, str], ActorHandle]


def process_launcher(command: Sequence[str]) -> ActorLauncher:
    """An actor process per episode from an argv template (`{endpoint}`, `{python}`)."""

    def launch(endpoint: Endpoint, instructions: str) -> ActorHandle:
        argv = render_command(command, endpoint=str(endpoint.root), python=sys.executable)
        return ActorProcess(argv, instructions=instructions, workdir=endpoint.scratch)

    return launch


@dataclass(frozen=True)
class _Prepared:
    runner: EpisodeRunner
    request: EpisodeRequest
    evidence: EpisodeEvidence


def _prepare(
    case: Case,
    attempt: int,
    settings: RunSettings,
    adapter: LiberoAdapter,
    run_dir: Path,
    video: FrameSink | None = None,
) -> _Prepared:
    """Checks first (nothing is created if the configuration is wrong), then evidence."""
    runner = EpisodeRunner(adapter, settings, video)
    horizon = reference_horizon(case.suite).controls
    runner.check_configuration(horizon)
    request = EpisodeRequest(
        attempt_id=case.attempt_id(attempt),
        case_id=case.case_id,
        identity=resolve_task(case.suite, case.task_index, case.task_order_index),
        init_state_index=case.init_state_index,
        seed=case.seed,
        reference_horizon=horizon,
    )
    evidence = EpisodeEvidence(run_dir / "episodes" / request.attempt_id)
    return _Prepared(runner, request, evidence)


def run_blinded_episode(
    case: Case,
    *,
    attempt: int,
    settings: RunSettings,
    adapter: LiberoAdapter,
    run_dir: Path,
    mailbox_root: Path,
    launch_actor: ActorLauncher | None,
    on_launch_message: Callable[[str], None] | None = None,
    record: RecordMode = "full",
) -> EpisodeResult:
    """Run `case` against a fresh actor through a fresh opaque endpoint.

    With no launcher, an external actor is handed the launch message by the coordinator
    (`on_launch_message` receives it; it is also kept privately). `record="full"` adds
    an MP4 per camera of every executed control (cameras then render every control).
    """
    video = EpisodeVideo(run_dir / "episodes" / case.attempt_id(attempt), CAMERAS)
    prepared = _prepare(
        case, attempt, settings, adapter, run_dir, video if record == "full" else None
    )
    adapter.record_frames = record == "full"
    evidence = prepared.evidence
    endpoint = create_endpoint(mailbox_root)
    instructions = render_instructions(str(endpoint.root))
    # The endpoint-to-case mapping lives only here, in the private run directory.
    evidence.write_private(
        "endpoint.json",
        {"endpoint": str(endpoint.root), "token": endpoint.token, "case": case.model_dump()},
    )
    evidence.write_private("launch_message.json", {"instructions": instructions})
    mailbox = MailboxTransport(
        endpoint, evidence, watch_mode=settings.watch_mode, keep_images=record == "full"
    )
    transport: Transport = mailbox
    actor: ActorHandle | None = None
    try:
        if launch_actor is not None:
            actor = launch_actor(endpoint, instructions)
            evidence.event("actor_started", **actor.description())
            transport = ActorLivenessGuard(mailbox, actor.alive)
        elif on_launch_message is not None:
            on_launch_message(instructions)
        result = prepared.runner.run(prepared.request, transport, evidence)
        if record == "full":
            videos = video.finish()
            evidence.event("videos_written", videos={c: v.document() for c, v in videos.items()})
    finally:
        video.abort()
        if actor is not None:
            status = actor.stop()
            evidence.event("actor_stopped", exit_status=status)
        mailbox.sweep_late()  # what the actor wrote between the close and its end
        evidence.close()
    evidence.write_result(result)
    return result


def run_in_process_episode(
    case: Case,
    *,
    attempt: int,
    settings: RunSettings,
    adapter: LiberoAdapter,
    run_dir: Path,
    policy: Policy,
) -> EpisodeResult:
    """The same episode with an in-process `Policy.act` instead of a mailbox actor."""
    adapter.record_frames = False
    prepared = _prepare(case, attempt, settings, adapter, run_dir)
    try:
        transport = PolicyTransport(policy, prepared.evidence)
        result = prepared.runner.run(prepared.request, transport, prepared.evidence)
    finally:
        prepared.evidence.close()
    prepared.evidence.write_result(result)
    return result
