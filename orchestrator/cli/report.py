"""`mailroom report` and `status`: reading a run from its result documents."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from mailroom.orchestrator.cli.exits import EXIT_INCOMPLETE, EXIT_OK
from mailroom.orchestrator.cli.options import console, json_option, run_dir_argument
from rich import box
from rich.table import Table


def print_report(report: Any) -> None:
    title = f"{report.run_id}  ({report.profile}, plan {report.plan_kind})"
    table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 0))
    table.add_column("suite", no_wrap=True)
    # Short headers so the table fits an 80-column terminal; the words follow below.
    for column in (
        "sel",
        "compl",
        "succ",
        "fail",
        "err",
        "unatt",
        "rate",
        "unblind",
        "unconf",
    ):
        table.add_column(column, justify="right", min_width=len(column), no_wrap=True)
    rows = [*sorted(report.suites.items()), ("overall", report.overall)]
    for name, t in rows:
        rate = "n/a" if t.success_rate is None else f"{t.success_rate:.1%}"
        table.add_row(
            name,
            str(t.selected),
            str(t.completed),
            str(t.success),
            str(t.failure),
            str(t.errored),
            str(t.unattempted),
            rate,
            str(t.not_blinded),
            str(t.not_confined),
        )
    console.print(table)
    console.print(
        "sel selected, compl completed, succ success, fail failure, err errored, "
        "unatt unattempted, rate success/completed, unblind not blinded, "
        "unconf not confined",
        style="dim",
    )
    if not report.capability_score:
        console.print("[yellow]diagnostic profile: infrastructure evidence, not a capability score")
    modes = ", ".join(f"{mode} {n}" for mode, n in report.confinement_modes.items()) or "none yet"
    console.print(f"confinement of the attempts: {modes}", highlight=False)
    if report.not_confined_attempts:
        console.print(
            f"[yellow]{len(report.not_confined_attempts)} attempts were NOT confined[/yellow] "
            "(run unconfined with --confinement none, started externally, or recorded before "
            "confinement existed): their actors could read what the evaluator's user can, "
            "so their results were not confined",
            highlight=False,
        )
    for bad in report.corrupt_results:
        console.print(f"[red]corrupt result, not counted:[/red] {bad['file']}: {bad['reason']}")
    console.print("provider usage: unknown (a file mailbox cannot meter it)")


@click.command()
@run_dir_argument()
@json_option()
def report(run_dir: Path, as_json: bool) -> None:
    """Success per suite with its denominators, from the result documents alone."""
    from mailroom.orchestrator.results.reporter import build_report, report_json

    try:
        built = build_report(run_dir)
    except (OSError, ValueError, KeyError) as exc:
        raise click.UsageError(f"cannot report on {run_dir}: {exc}") from exc
    if as_json:
        sys.stdout.write(report_json(built) + "\n")
    else:
        print_report(built)
    sys.exit(EXIT_OK if built.complete and not built.corrupt_results else EXIT_INCOMPLETE)


@click.command()
@run_dir_argument()
@json_option()
def status(run_dir: Path, as_json: bool) -> None:
    """Where a run stands: selected, completed, in progress, unattempted."""
    from mailroom.orchestrator.campaign.run_directory import RunDirectory
    from mailroom.orchestrator.catalog.plans import parse_plan

    run = RunDirectory(run_dir)
    if not run.exists():
        raise click.UsageError(f"{run_dir} holds no manifest.json: not a run directory")
    cases = parse_plan(run.plan_path.read_bytes(), check_catalog=False).to_cases()
    latest = {r.case_id: r for r in run.attempts()}
    state = {
        "selected": len(cases),
        "completed": 0,
        "in_progress_or_interrupted": 0,
        "corrupt": 0,
        "unattempted": 0,
    }
    for case in cases:
        record_ = latest.get(case.case_id)
        if record_ is None:
            state["unattempted"] += 1
        elif record_.completed:
            state["completed"] += 1
        elif record_.result is None:
            state["in_progress_or_interrupted"] += 1
        else:
            state["corrupt"] += 1
    if as_json:
        sys.stdout.write(json.dumps(state, indent=2) + "\n")
    else:
        table = Table(title=f"status of {run_dir.name}")
        table.add_column("what")
        table.add_column("cases", justify="right")
        for key, value in state.items():
            table.add_row(key.replace("_", " "), str(value))
        console.print(table)
    done = state["completed"] == state["selected"]
    sys.exit(EXIT_OK if done else EXIT_INCOMPLETE)
