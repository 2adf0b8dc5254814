"""`mailroom replay`: re-execute a run's recorded episodes and check them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from mailroom.orchestrator.cli.exits import EXIT_FAILED, EXIT_OK
from mailroom.orchestrator.cli.family_options import local_copy_options
from mailroom.orchestrator.cli.options import (
    console,
    json_option,
    progress_bar,
    run_dir_argument,
    use_run_catalog,
)
from mailroom.orchestrator.replay.campaign import ReplayReport
from mailroom.orchestrator.replay.replayer import ReplayVerdict
from rich import box
from rich.markup import escape
from rich.table import Table


def _short(text: str | None) -> str:
    return "none" if text is None else (text[:12] + "..." if len(text) > 16 else text)


def _where(verdict: ReplayVerdict) -> str:
    if verdict.verdict == "reproduced":
        return (
            f"{verdict.checked_observations} observation(s), "
            f"{verdict.executed_controls} control(s) checked"
        )
    if verdict.verdict == "not_replayable":
        return verdict.reason or ""
    return (
        f"at control {verdict.control} (observation {verdict.observation}; agreed until "
        f"control {verdict.agreed_until_control}): {verdict.field}"
    )


def print_replay(report: ReplayReport) -> None:
    table = Table(title=f"replay of {report.run_id}", box=box.SIMPLE_HEAD, show_edge=False)
    table.add_column("attempt", overflow="fold")
    table.add_column("verdict", no_wrap=True)
    table.add_column("checked, or where and why", overflow="fold")
    for verdict in report.verdicts:
        table.add_row(escape(verdict.attempt_id), verdict.verdict, escape(_where(verdict)))
    console.print(table)
    for verdict in report.verdicts:
        if verdict.verdict == "diverged":
            console.print(
                f"{escape(verdict.attempt_id)} diverged {escape(_where(verdict))}: recorded "
                f"{escape(_short(verdict.recorded))}, replayed {escape(_short(verdict.replayed))}",
                highlight=False,
            )
    counts = report.counts()
    console.print(", ".join(f"{k} {v}" for k, v in counts.items()), highlight=False)
    if report.drift and counts["diverged"]:
        console.print(
            "[yellow]the simulator stack differs from the run's: a divergence here is drift "
            "between versions, not evidence of tampering[/yellow]",
            highlight=False,
        )


@click.command()
@run_dir_argument()
@click.option(
    "--case",
    "cases",
    multiple=True,
    help="A case id or attempt id to replay (repeatable; default: every attempt).",
)
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True)
@json_option("Print the verdicts as JSON.")
@local_copy_options()
def replay(run_dir: Path, cases: tuple[str, ...], workers: int, as_json: bool) -> None:
    """Re-execute each recorded attempt of RUN_DIR from its recorded case, seed and
    executed actions, and check every delivered observation's image hashes, the
    executed controls, the first success and the native outcome.

    Verdicts: reproduced, diverged (the field, control and observation), not_replayable
    (what is missing). Exit codes: 0 every checked attempt reproduced; 1 some did not;
    2 usage error.
    """
    from mailroom.orchestrator.records.run_directory import RunDirectory, not_a_run_directory
    from mailroom.orchestrator.replay.campaign import Selection, replay_run
    from mailroom.orchestrator.replay.drift import version_drift

    run = RunDirectory(run_dir)
    if not run.exists():
        raise click.UsageError(not_a_run_directory(run_dir))
    use_run_catalog(run_dir)
    drift = version_drift(run.read_manifest())
    for name, (recorded, installed) in drift.items():
        console.print(
            f"[yellow]version drift:[/yellow] {escape(name)} recorded {escape(str(recorded))}, "
            f"installed {escape(str(installed))}",
            highlight=False,
        )
    with progress_bar(hidden=as_json) as progress:
        task = progress.add_task("replaying", total=None)
        report = replay_run(
            run_dir,
            selection=Selection(cases),
            workers=workers,
            on_scheduled=lambda n: progress.update(task, total=n),
            on_verdict=lambda _: progress.advance(task),
        )
    if not report.verdicts:
        raise click.UsageError("no attempt to replay (check --case)")
    if as_json:
        sys.stdout.write(json.dumps(report.model_dump(mode="json"), indent=2) + "\n")
    else:
        print_replay(report)
    sys.exit(EXIT_OK if report.all_reproduced else EXIT_FAILED)
