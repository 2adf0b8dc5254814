"""The `mailroom` command group, with every command registered on it and `demo` (one episode)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import cast

import click
from mailroom.mailbox.watcher import WatchMode
from mailroom.orchestrator.packages.headless import configure_headless_rendering
from rich.markup import escape
from rich.table import Table

configure_headless_rendering()

from mailroom.orchestrator.cli.cells import cell  # noqa: E402
from mailroom.orchestrator.cli.exits import (  # noqa: E402
    EXIT_EPISODE_ERROR,
    EXIT_INCOMPLETE,
    EXIT_OK,
)
from mailroom.orchestrator.cli.options import (  # noqa: E402
    confinement_option,
    console,
    default_run_dir,
    json_option,
    mailbox_root_option,
    run_dir_option,
    watch_mode_option,
)
from mailroom.orchestrator.records.result import EpisodeResult  # noqa: E402


def _confinement_words(result: EpisodeResult) -> str:
    record = result.confinement
    if record is None:
        return "not recorded (a v1 result): not confined"
    if record.mode == "sandbox":
        return f"sandbox (bubblewrap), network {cell(record.network, missing='not recorded')}"
    return f"{record.mode}: NOT confined"


def _usage_words(result: EpisodeResult) -> str:
    """What the gateway metered of the episode's actor, or why nothing did (null)."""
    from mailroom.orchestrator.records.result import ProviderUsage
    from mailroom.orchestrator.results.usage import (
        UNMETERED_WORDS,
        count_text,
        unmetered_reason,
        usd_text,
    )

    usage = result.usage
    reason = unmetered_reason(result)
    if reason is not None or not isinstance(usage, ProviderUsage):
        return f"not metered (null): {UNMETERED_WORDS[reason] if reason else 'unknown'}"
    return (
        f"{count_text(usage.provider_requests)} requests, {count_text(usage.input_tokens)} "
        f"input and {count_text(usage.output_tokens)} output tokens, {usd_text(usage.cost)}"
    )


def _print_result(result: EpisodeResult, run_dir: Path) -> None:
    c = result.counters
    table = Table(title="mailroom demo: one blinded episode (diagnostic actor)")
    table.add_column("field")
    table.add_column("value", overflow="fold")
    rows = [
        (
            "case",
            f"{result.case.suite} task {result.case.task_index} "
            f"init {result.case.init_state_index} seed {result.case.seed}",
        ),
        ("outcome", result.outcome),
        ("termination", cell(result.termination, missing="none")),
        ("truncation", cell(result.truncation, missing="none")),
        ("policy calls", str(c.policy_calls)),
        ("action decisions", str(c.action_decisions)),
        ("rejected / stop responses", f"{c.rejected_responses} / {c.stop_responses}"),
        ("executed / settling controls", f"{c.executed_controls} / {c.settling_controls}"),
        (
            "first success control (call)",
            "none"
            if c.first_success_control is None
            else f"control {c.first_success_control} (policy call {c.first_success_policy_call})",
        ),
        (
            "decision latency median",
            "n/a" if result.latency.median_ms is None else f"{result.latency.median_ms:.1f} ms",
        ),
        ("provider usage", _usage_words(result)),
        ("errors", ", ".join(e.code for e in result.errors) or "none"),
        ("confinement", _confinement_words(result)),
        ("wall time", f"{result.wall_time_s:.1f} s"),
        ("run directory (private)", str(run_dir)),
    ]
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)
    console.print("[dim]scripted_diagnostic is infrastructure evidence, not a capability score.")


@click.group()
def main() -> None:
    """Blinded evaluation of file-mailbox actors on robot-manipulation benchmarks."""
    # Run directories and their evidence are the orchestrator's alone; outbox files are
    # given their group-readable mode explicitly.
    os.umask(0o077)


@main.command()
@json_option("Print the episode result document.")
@run_dir_option("The run's private directory (default: new, under runs/<profile>/ here).")
@mailbox_root_option("Where the opaque endpoint is created (default: a new temporary directory).")
@watch_mode_option()
@confinement_option("Run the diagnostic actor in the sandbox, or explicitly unconfined.", "sandbox")
def demo(
    as_json: bool,
    run_dir: Path | None,
    mailbox_root: Path | None,
    watch_mode: str,
    confinement: str,
) -> None:
    """One blinded LIBERO-10 episode (task 0, initial state 0, seed 20260907) on the real
    simulator, answered by the built-in diagnostic actor in its own confined process: a
    launch of a one-case plan with the diagnostic profile, printed as its one result."""
    from mailroom.orchestrator.actors.confinement import ConfinementError, resolve_confinement
    from mailroom.orchestrator.catalog.cases import DEMO_CASE
    from mailroom.orchestrator.catalog.plans import render_plan
    from mailroom.orchestrator.cli.launch_preflight import LaunchInputs, own_mailbox_root
    from mailroom.orchestrator.cli.launch_profile import load_profile_option, profile_actor_command
    from mailroom.orchestrator.cli.launch_run import execute_launch
    from mailroom.orchestrator.episode.settings import RunSettings
    from mailroom.orchestrator.families.plans import build_plan
    from mailroom.orchestrator.records.confinement import ConfinementMode
    from mailroom.orchestrator.records.run_directory import RunDirectory

    profile = "scripted_diagnostic"
    settings = RunSettings(
        budget_mode="decisions",
        max_policy_calls=200,
        replan_interval=5,
        response_timeout_s=120.0,
        watch_mode=cast(WatchMode, watch_mode),
    )
    run_dir = run_dir or default_run_dir(profile, "demo")
    if RunDirectory(run_dir).exists():
        raise click.UsageError(f"{run_dir} holds a run already: choose a new --run-dir")
    plan = build_plan("task_coverage", suite=DEMO_CASE.suite, task_ids=[DEMO_CASE.task_index])
    loaded = load_profile_option(profile)
    actor = profile_actor_command(loaded, None)
    assert actor is not None  # the diagnostic profile declares its actor
    try:
        chosen = resolve_confinement(
            requested=cast(ConfinementMode, confinement),
            spawns_actors=True,
            declaration=loaded.profile.confinement,
            actor_paths=(),
        )
    except ConfinementError as exc:
        raise click.UsageError(str(exc)) from exc

    def show_the_result(run: Path) -> int:
        (attempt,) = RunDirectory(run).attempts()
        result = attempt.result
        if not isinstance(result, EpisodeResult):
            console.print(f"[red]no readable result:[/red] {escape(str(result))}", highlight=False)
            return EXIT_INCOMPLETE
        if as_json:
            sys.stdout.write(json.dumps(result.document(), indent=2, sort_keys=True) + "\n")
        else:
            _print_result(result, run)
        return EXIT_EPISODE_ERROR if result.outcome == "error" else EXIT_OK

    with own_mailbox_root(mailbox_root) as root:
        demo_launch = LaunchInputs(
            run_dir=run_dir,
            plan_bytes=render_plan(plan),
            profile=loaded,
            settings=settings,
            actor_command=actor,
            mailbox_root=root,
            workers=1,
            record="full",
            rerun_errored=False,
            as_json=as_json,
            confinement=chosen,
            slots=1,
            holding="dedicated",
        )
        execute_launch(demo_launch, finish=show_the_result)


def _register() -> None:
    """Each command family lives in its own module."""
    from mailroom.orchestrator.cli.audit import register as register_audit
    from mailroom.orchestrator.cli.catalog import register as register_catalog
    from mailroom.orchestrator.cli.check import check_response
    from mailroom.orchestrator.cli.compare import compare
    from mailroom.orchestrator.cli.export import export
    from mailroom.orchestrator.cli.launch import launch, resume
    from mailroom.orchestrator.cli.perf import bench
    from mailroom.orchestrator.cli.replay import replay
    from mailroom.orchestrator.cli.report import report, status
    from mailroom.orchestrator.cli.view import view

    commands = (check_response, launch, resume, status, report, compare, view, replay)
    for command in (*commands, bench, export):
        main.add_command(command)
    register_catalog(main)
    register_audit(main)


_register()
