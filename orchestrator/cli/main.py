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
from rich.table import Table

configure_headless_rendering()

from mailroom.orchestrator.cli.exits import EXIT_EPISODE_ERROR, EXIT_OK  # noqa: E402
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
        return f"sandbox (bubblewrap), network {record.network}"
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
        ("termination", str(result.termination)),
        ("truncation", str(result.truncation)),
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
    simulator, answered by the built-in diagnostic actor in its own confined process."""
    from mailroom.orchestrator.actors.confinement import ConfinementSettings
    from mailroom.orchestrator.campaign.manifest import build_manifest
    from mailroom.orchestrator.catalog.cases import DEMO_CASE
    from mailroom.orchestrator.catalog.plans import render_plan
    from mailroom.orchestrator.cli.launch import (
        build_launcher,
        load_profile_option,
        own_mailbox_root,
        profile_actor_command,
        refuse_private_mailbox_root,
    )
    from mailroom.orchestrator.episode.blinded import run_blinded_episode
    from mailroom.orchestrator.episode.settings import RunSettings
    from mailroom.orchestrator.families.plans import build_plan
    from mailroom.orchestrator.families.registry import reference_horizon
    from mailroom.orchestrator.records.confinement import ConfinementMode
    from mailroom.orchestrator.records.run_directory import RunDirectory
    from mailroom.orchestrator.sim.libero import LiberoAdapter

    profile = "scripted_diagnostic"
    settings = RunSettings(
        budget_mode="decisions",
        max_policy_calls=200,
        replan_interval=5,
        response_timeout_s=120.0,
        watch_mode=cast(WatchMode, watch_mode),
    )
    run_dir = run_dir or default_run_dir(profile, "demo")
    # A run of one case like any other, so report, audit and export read it.
    plan = build_plan("task_coverage", suite=DEMO_CASE.suite, task_ids=[DEMO_CASE.task_index])
    (case,) = plan.to_cases()
    with own_mailbox_root(mailbox_root) as mailbox_root:
        if run_dir.resolve().is_relative_to(mailbox_root.resolve()):
            raise click.UsageError("the run directory must not be under the mailbox root")
        run = RunDirectory(run_dir)
        if run.exists():
            raise click.UsageError(f"{run_dir} holds a run already: choose a new --run-dir")
        refuse_private_mailbox_root(run_dir, mailbox_root, plan)
        loaded = load_profile_option(profile)
        limits = loaded.profile.limits
        actor = profile_actor_command(loaded, None)
        assert actor is not None  # the diagnostic profile declares its actor
        chosen = ConfinementSettings(mode=cast(ConfinementMode, confinement))
        launcher = build_launcher(
            actor,
            confinement=chosen,
            limits=limits,
            run_dir=run_dir,
            mailbox_root=mailbox_root,
            profile=loaded,
        )
        assert launcher is not None
        manifest = build_manifest(
            run_id=run_dir.name,
            plan_sha256=plan.plan_sha256,
            plan_kind=plan.kind,
            n_cases=1,
            profile_name=profile,
            profile_declaration=loaded.profile.declaration(),
            settings=settings,
            actor_command=actor,
            record="full",
            run_dir=run_dir,
            mailbox_root=mailbox_root,
            workers=1,
            confinement=chosen,
            sandbox_tool=None if launcher.sandbox is None else launcher.sandbox.tool,
            programs=launcher.programs(),
        )
        run.write_manifest(manifest)
        run.plan_path.write_bytes(render_plan(plan))
        run.event("launched", volatile=manifest["volatile"])
        adapter = LiberoAdapter(
            control_cap=settings.control_cap(reference_horizon(case.suite).controls)
        )
        try:
            with console.status("running one blinded episode on the real simulator..."):
                result = run_blinded_episode(
                    case,
                    attempt=1,
                    settings=settings,
                    adapter=adapter,
                    run_dir=run_dir,
                    mailbox_root=mailbox_root,
                    launch_actor=launcher,
                    limits=limits,
                    instructions=loaded.profile.instructions_version,
                )
            run.event("launch_finished")
        finally:
            adapter.close()
        if as_json:
            sys.stdout.write(json.dumps(result.document(), indent=2, sort_keys=True) + "\n")
        else:
            _print_result(result, run_dir)
        sys.exit(EXIT_EPISODE_ERROR if result.outcome == "error" else EXIT_OK)


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
