"""`mailroom export`: a run's episodes, steps and provider requests as Parquet tables, its
attempts as Rerun recordings, or the run as a LeRobot dataset."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NoReturn

import click
from mailroom.orchestrator.cli.exits import EXIT_INCOMPLETE, EXIT_OK
from mailroom.orchestrator.cli.options import console, json_option, run_dir_argument
from rich.markup import escape
from rich.table import Table


@click.command()
@run_dir_argument()
@click.option(
    "--format",
    "format_",
    type=click.Choice(["parquet", "rerun", "lerobot"]),
    default="parquet",
    show_default=True,
    help="Output format: Parquet tables, one Rerun recording (.rrd) per attempt, or a "
    "LeRobot dataset (v3.0).",
)
@click.option(
    "--attempt",
    "attempt_ids",
    multiple=True,
    metavar="ID",
    help="With --format rerun: only this attempt (repeatable; default: every attempt).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where the files go (default: RUN_DIR/export; a LeRobot dataset: RUN_DIR/export/lerobot).",
)
@json_option("Print a summary document as JSON.")
def export(
    run_dir: Path,
    format_: str,
    attempt_ids: tuple[str, ...],
    out_dir: Path | None,
    as_json: bool,
) -> None:
    """Write RUN_DIR's episodes (one row per result document, with the provider usage the
    gateway metered: null where nothing did), steps (one row per executed control,
    LeRobot-aligned fields) and provider requests (one row per model request through the
    gateway) as Parquet, or with --format rerun one recording per attempt (open one with
    `rerun FILE.rrd`), or with --format lerobot a LeRobot v3.0 dataset: one episode per
    attempt, each frame the observation before its control and the action executed.

    Corrupt or missing result documents and unusable steps or evidence are skipped and
    listed. Exit codes: 0 everything exported; 4 exported, but something was skipped;
    2 usage error (not a run directory, unreadable manifest or plan, an unknown attempt).
    """
    if format_ == "rerun":
        _export_rerun(run_dir, out_dir, attempt_ids, as_json)
    if attempt_ids:
        raise click.UsageError("--attempt applies to --format rerun only")
    if format_ == "lerobot":
        _export_lerobot(run_dir, out_dir, as_json)
    from mailroom.orchestrator.results.export import ExportError, export_parquet

    try:
        summary = export_parquet(run_dir, out_dir)
    except ExportError as exc:
        raise click.UsageError(f"cannot export {run_dir}: {exc}") from exc
    if as_json:
        sys.stdout.write(json.dumps(summary.document(), indent=2, sort_keys=True) + "\n")
    else:
        table = Table(title=f"export of {run_dir.name}")
        table.add_column("file")
        table.add_column("rows", justify="right")
        table.add_row(escape(str(summary.episodes_file)), str(summary.episodes))
        table.add_row(escape(str(summary.steps_file)), str(summary.steps))
        table.add_row(escape(str(summary.requests_file)), str(summary.requests))
        console.print(table)
        if not summary.proprio:
            console.print("observation.state: absent (the run's proprio track was off)")
        for item in summary.skipped:
            console.print(f"[yellow]skipped:[/yellow] {escape(item.file)}: {escape(item.reason)}")
    sys.exit(EXIT_INCOMPLETE if summary.skipped else EXIT_OK)


def _export_rerun(
    run_dir: Path, out_dir: Path | None, attempt_ids: tuple[str, ...], as_json: bool
) -> NoReturn:
    from mailroom.orchestrator.results.export import ExportError
    from mailroom.orchestrator.results.rerun_export import export_rerun

    try:
        summary = export_rerun(run_dir, out_dir, attempt_ids)
    except ExportError as exc:
        raise click.UsageError(f"cannot export {run_dir}: {exc}") from exc
    if as_json:
        sys.stdout.write(json.dumps(summary.document(), indent=2, sort_keys=True) + "\n")
    else:
        table = Table(title=f"Rerun recordings of {run_dir.name}")
        for column in ("file", "observations", "controls", "decisions", "native success"):
            table.add_column(column, justify="left" if column == "file" else "right")
        for r in summary.recordings:
            success = "-" if r.native_success_control is None else str(r.native_success_control)
            table.add_row(
                escape(str(r.file)), str(r.observations), str(r.controls), str(r.decisions), success
            )
        console.print(table)
        console.print("open one with: rerun FILE.rrd")
        for item in summary.skipped:
            console.print(f"[yellow]skipped:[/yellow] {escape(item.file)}: {escape(item.reason)}")
    sys.exit(EXIT_INCOMPLETE if summary.skipped else EXIT_OK)


def _export_lerobot(run_dir: Path, out_dir: Path | None, as_json: bool) -> NoReturn:
    from mailroom.orchestrator.results.export import ExportError
    from mailroom.orchestrator.results.lerobot_export import export_lerobot

    try:
        summary = export_lerobot(run_dir, out_dir)
    except ExportError as exc:
        raise click.UsageError(f"cannot export {run_dir}: {exc}") from exc
    if as_json:
        sys.stdout.write(json.dumps(summary.document(), indent=2, sort_keys=True) + "\n")
    else:
        table = Table(title=f"LeRobot dataset of {run_dir.name}", show_header=False)
        table.add_column("what")
        table.add_column("value")
        table.add_row("dataset", escape(str(summary.out_dir)))
        table.add_row("episodes", str(summary.episodes))
        table.add_row("frames", str(summary.frames))
        table.add_row("tasks", str(summary.tasks))
        cameras = ", ".join(summary.cameras) or "none (the run kept no images: record minimal)"
        table.add_row("cameras", escape(cameras))
        table.add_row("observation.state", "yes" if summary.proprio else "no (proprio off)")
        console.print(table)
        for item in summary.skipped:
            console.print(f"[yellow]skipped:[/yellow] {escape(item.file)}: {escape(item.reason)}")
    sys.exit(EXIT_INCOMPLETE if summary.skipped else EXIT_OK)
