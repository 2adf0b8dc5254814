"""`mailroom export`: a run's episodes and steps as Parquet tables."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from mailroom.orchestrator.cli.exits import EXIT_INCOMPLETE, EXIT_OK
from mailroom.orchestrator.cli.options import console, json_option, run_dir_argument
from rich.table import Table


@click.command()
@run_dir_argument()
@click.option(
    "--format",
    "format_",
    type=click.Choice(["parquet"]),
    default="parquet",
    show_default=True,
    help="Output format.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where episodes.parquet and steps.parquet go (default: RUN_DIR/export).",
)
@json_option("Print a summary document as JSON.")
def export(run_dir: Path, format_: str, out_dir: Path | None, as_json: bool) -> None:
    """Write RUN_DIR's episodes (one row per result document) and steps (one row per
    executed control, LeRobot-aligned fields) as Parquet.

    Corrupt or missing result documents and unusable steps files are skipped and listed.
    Exit codes: 0 everything exported; 4 exported, but something was skipped;
    2 usage error (not a run directory, unreadable manifest or plan).
    """
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
        table.add_row(str(summary.episodes_file), str(summary.episodes))
        table.add_row(str(summary.steps_file), str(summary.steps))
        console.print(table)
        if not summary.proprio:
            console.print("observation.state: absent (the run's proprio track was off)")
        for item in summary.skipped:
            console.print(f"[yellow]skipped:[/yellow] {item.file}: {item.reason}")
    sys.exit(EXIT_INCOMPLETE if summary.skipped else EXIT_OK)
