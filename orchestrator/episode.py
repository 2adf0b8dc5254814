"""One blinded episode end to end: endpoint, actor, runner, evidence, result."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from mailroom.mailbox.endpoint import create_endpoint

from .actor_process import ActorProcess, render_command
from .cases import Case
from .catalog import reference_horizon
from .evidence import EpisodeEvidence
from .instructions import render_instructions
from .libero_adapter import LiberoAdapter, resolve_task
from .mailbox_transport import MailboxTransport
from .results import EpisodeResult
from .runner import EpisodeRequest, EpisodeRunner
from .settings import RunSettings


def run_blinded_episode(
    case: Case,
    *,
    attempt: int,
    settings: RunSettings,
    adapter: LiberoAdapter,
    run_dir: Path,
    mailbox_root: Path,
    actor_command: Sequence[str] | None,
) -> EpisodeResult:
    """Run `case` against a fresh actor through a fresh opaque endpoint.

    `actor_command` is an argv template with `{endpoint}` and `{python}` fields; None
    means an external actor is handed the launch message by the coordinator.
    """
    identity = resolve_task(case.suite, case.task_index, case.task_order_index)
    attempt_id = case.attempt_id(attempt)
    evidence = EpisodeEvidence(run_dir / "episodes" / attempt_id)
    endpoint = create_endpoint(mailbox_root)
    instructions = render_instructions(str(endpoint.root))
    # The endpoint-to-case mapping lives only here, in the private run directory.
    evidence.write_private(
        "endpoint.json",
        {"endpoint": str(endpoint.root), "token": endpoint.token, "case": case.model_dump()},
    )
    evidence.write_private("launch_message.json", {"instructions": instructions})
    transport = MailboxTransport(endpoint, evidence, watch_mode=settings.watch_mode)
    actor: ActorProcess | None = None
    try:
        if actor_command is not None:
            argv = render_command(actor_command, endpoint=str(endpoint.root), python=sys.executable)
            actor = ActorProcess(argv, instructions=instructions, workdir=endpoint.scratch)
            evidence.event("actor_started", argv=argv, pid=actor.pid)
        runner = EpisodeRunner(adapter, settings)
        request = EpisodeRequest(
            attempt_id=attempt_id,
            case_id=case.case_id,
            identity=identity,
            init_state_index=case.init_state_index,
            seed=case.seed,
            reference_horizon=reference_horizon(case.suite).controls,
        )
        result = runner.run(request, transport, evidence)
    finally:
        if actor is not None:
            status = actor.stop()
            evidence.event("actor_stopped", exit_status=status)
        evidence.close()
    evidence.write_result(result)
    return result
