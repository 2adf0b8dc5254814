"""A launch or resume from its checked inputs to its exit code: preflight, the campaign
under a progress bar, and the run's report."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from mailroom.orchestrator.campaign.stopping import StopRequest
from mailroom.orchestrator.cli.exits import (
    EXIT_CLUSTER,
    EXIT_CONFLICT,
    EXIT_INCOMPLETE,
    EXIT_INFRASTRUCTURE,
    EXIT_OK,
)
from mailroom.orchestrator.cli.launch_console import (
    print_actor_share,
    print_capacity,
    progress_listener,
)
from mailroom.orchestrator.cli.launch_preflight import LaunchInputs, preflight
from mailroom.orchestrator.cli.launch_stop import exit_code, stopped_words, stopping_on_signals
from mailroom.orchestrator.cli.options import console, progress_bar
from mailroom.orchestrator.cli.report import print_report
from rich.markup import escape


def execute_launch(
    inputs: LaunchInputs, *, finish: Callable[[Path], int] | None = None
) -> NoReturn:
    """Run the plan's cases into the run directory and end the command: the run's report
    and its exit code, or, with `finish`, what `finish` prints of the run and the code it
    returns (the demo's one episode). Ctrl-C or SIGTERM stops the campaign instead: what
    the run holds, the command that continues it, and 130 or 143."""
    stop = StopRequest()
    with stopping_on_signals(stop, inputs.run_dir):
        _execute(inputs, stop, finish)


def _stopped(stop: StopRequest, inputs: LaunchInputs, case_ids: list[str]) -> NoReturn:
    assert stop.signum is not None
    for line in stopped_words(stop.signum, inputs.run_dir, case_ids):
        console.print(escape(line), highlight=False, soft_wrap=True)
    sys.exit(exit_code(stop.signum))


def _execute(
    inputs: LaunchInputs, stop: StopRequest, finish: Callable[[Path], int] | None
) -> NoReturn:
    from mailroom.orchestrator.campaign.launch import CampaignRequest, run_campaign
    from mailroom.orchestrator.campaign.manifest import ManifestConflictError
    from mailroom.orchestrator.cluster.errors import ClusterUnavailableError
    from mailroom.orchestrator.records.run_directory import RunLockedError
    from mailroom.orchestrator.results.reporter import build_report, report_json

    decided = preflight(inputs)
    case_ids = [case.case_id for case in decided.plan.to_cases()]
    if stop.requested:
        _stopped(stop, inputs, case_ids)
    run_dir, profile = inputs.run_dir, inputs.profile
    request = CampaignRequest(
        run_dir=run_dir,
        plan=decided.plan,
        plan_bytes=inputs.plan_bytes,
        profile=profile.name,
        declaration=profile.profile.declaration(),
        profile_dir=profile.directory,
        settings=inputs.settings,
        actor_command=inputs.actor_command,
        launcher=decided.launcher,
        limits=profile.profile.limits,
        mailbox_root=inputs.mailbox_root,
        workers=inputs.workers,
        record=inputs.record,
        confinement=inputs.confinement,
        rerun_errored=inputs.rerun_errored,
        slots=decided.capacity.slots,
        holding=inputs.holding,
        memory=inputs.memory,
        executor=decided.executor,
        stop=stop,
    )
    if inputs.executor == "local":  # stderr: --json's stdout stays clean
        print_capacity(request.memory, inputs.workers, inputs.holding, decided.capacity)
    print_actor_share(profile.profile.limits)
    counts = {"success": 0, "failure": 0, "error": 0}
    try:
        with progress_bar(hidden=inputs.as_json) as progress:
            task = progress.add_task("starting", total=None)
            # stdout carries the report alone: what a library prints meanwhile (Ray's
            # driver prints its workers' deaths to stdout) goes to stderr.
            with contextlib.redirect_stdout(sys.stderr):
                outcome = run_campaign(
                    request,
                    progress_listener(progress, task, counts, run_dir),
                    lambda n: progress.update(task, total=n),
                )
    except (ManifestConflictError, RunLockedError) as exc:
        console.print(f"[red]refused:[/red] {exc}")
        sys.exit(EXIT_CONFLICT)
    except ClusterUnavailableError as exc:
        console.print(f"[red]cluster unavailable:[/red] {escape(str(exc))}", highlight=False)
        sys.exit(EXIT_CLUSTER)
    except OSError as exc:
        console.print(f"[red]infrastructure error:[/red] the run directory failed: {exc}")
        sys.exit(EXIT_INFRASTRUCTURE)
    if outcome.unrecorded:
        for attempt_id, reason in outcome.unrecorded:
            console.print(f"[red]infrastructure error:[/red] {attempt_id}: {reason}")
        sys.exit(EXIT_INFRASTRUCTURE)
    if stop.requested:
        _stopped(stop, inputs, case_ids)
    if finish is not None:
        sys.exit(finish(run_dir))
    report = build_report(run_dir)
    if inputs.as_json:
        sys.stdout.write(report_json(report) + "\n")
    else:
        print_report(report)
        console.print(f"run directory (private): {run_dir}")
    sys.exit(EXIT_OK if report.complete and not report.corrupt_results else EXIT_INCOMPLETE)
