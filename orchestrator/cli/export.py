"""`mailroom export`: a run's episodes, steps and provider requests as Parquet tables, its
attempts as Rerun recordings or as ATIF agent trajectories, or the run as a LeRobot
dataset."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar

import click
from mailroom.orchestrator.cli.exits import EXIT_INCOMPLETE, EXIT_OK
from mailroom.orchestrator.cli.options import console, json_option, run_dir_argument
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:  # the exports import pyarrow, av and rerun: only when one runs
    from mailroom.orchestrator.results.atif_export import AtifExportSummary
    from mailroom.orchestrator.results.export import ExportSummary, Skipped
    from mailroom.orchestrator.results.lerobot_export import LeRobotExportSummary
    from mailroom.orchestrator.results.rerun_export import RerunExportSummary


@click.command()
@run_dir_argument()
@click.option(
    "--format",
    "format_",
    type=click.Choice(["parquet", "rerun", "lerobot", "atif"]),
    default="parquet",
    show_default=True,
    help="Output format: Parquet tables, one Rerun recording (.rrd) per attempt, a "
    "LeRobot dataset (v3.0), or one ATIF trajectory (Harbor's format, v1.7) per attempt.",
)
@click.option(
    "--attempt",
    "attempt_ids",
    multiple=True,
    metavar="ID",
    help="With --format rerun or atif: only this attempt (repeatable; default: every attempt).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where the files go (default: RUN_DIR/export; a LeRobot dataset: "
    "RUN_DIR/export/lerobot; trajectories: RUN_DIR/export/atif).",
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
    attempt, each frame the observation before its control and the action executed, or
    with --format atif one ATIF trajectory per attempt (each observation, the agent's own
    account where it printed one, each response with its verdict and metered usage).

    Corrupt or missing result documents and unusable steps or evidence are skipped and
    listed. Exit codes: 0 everything exported; 4 exported, but something was skipped;
    2 usage error (not a run directory, unreadable manifest or plan, an unknown attempt).
    """
    if attempt_ids and format_ not in ("rerun", "atif"):
        raise click.UsageError("--attempt applies to --format rerun and atif only")
    if format_ == "rerun":
        from mailroom.orchestrator.results.rerun_export import export_rerun

        recordings = _exported(run_dir, lambda: export_rerun(run_dir, out_dir, attempt_ids))
        _finish(recordings, as_json, lambda: _show_rerun(run_dir, recordings))
    if format_ == "atif":
        from mailroom.orchestrator.results.atif_export import export_atif

        trajectories = _exported(run_dir, lambda: export_atif(run_dir, out_dir, attempt_ids))
        _finish(trajectories, as_json, lambda: _show_atif(run_dir, trajectories))
    if format_ == "lerobot":
        from mailroom.orchestrator.results.lerobot_export import export_lerobot

        dataset = _exported(run_dir, lambda: export_lerobot(run_dir, out_dir))
        _finish(dataset, as_json, lambda: _show_lerobot(run_dir, dataset))
    from mailroom.orchestrator.results.export import export_parquet

    tables = _exported(run_dir, lambda: export_parquet(run_dir, out_dir))
    _finish(tables, as_json, lambda: _show_parquet(run_dir, tables))


class _Summary(Protocol):
    @property
    def skipped(self) -> list[Skipped]: ...

    def document(self) -> dict[str, Any]: ...


S = TypeVar("S", bound=_Summary)


def _exported(run_dir: Path, write: Callable[[], S]) -> S:
    """What `write` exported; a run it cannot export at all is a usage error."""
    from mailroom.orchestrator.results.export import ExportError

    try:
        return write()
    except ExportError as exc:
        raise click.UsageError(f"cannot export {run_dir}: {exc}") from exc


def _finish(summary: _Summary, as_json: bool, show: Callable[[], None]) -> NoReturn:
    """The summary as JSON, or shown with what was skipped; exit 4 if anything was."""
    if as_json:
        sys.stdout.write(json.dumps(summary.document(), indent=2, sort_keys=True) + "\n")
    else:
        show()
        for item in summary.skipped:
            console.print(f"[yellow]skipped:[/yellow] {escape(item.file)}: {escape(item.reason)}")
    sys.exit(EXIT_INCOMPLETE if summary.skipped else EXIT_OK)


def _show_parquet(run_dir: Path, summary: ExportSummary) -> None:
    table = Table(title=f"export of {run_dir.name}")
    table.add_column("file")
    table.add_column("rows", justify="right")
    table.add_row(escape(str(summary.episodes_file)), str(summary.episodes))
    table.add_row(escape(str(summary.steps_file)), str(summary.steps))
    table.add_row(escape(str(summary.requests_file)), str(summary.requests))
    console.print(table)
    if not summary.proprio:
        console.print("observation.state: absent (the run's proprio track was off)")


def _show_rerun(run_dir: Path, summary: RerunExportSummary) -> None:
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


def _show_lerobot(run_dir: Path, summary: LeRobotExportSummary) -> None:
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


def _show_atif(run_dir: Path, summary: AtifExportSummary) -> None:
    table = Table(title=f"ATIF trajectories of {run_dir.name}")
    table.add_column("attempt", overflow="fold")
    for column in ("steps", "decisions", "account", "images"):
        table.add_column(column, justify="right")
    for t in summary.trajectories:
        table.add_row(
            escape(t.attempt_id),
            *(str(n) for n in (t.steps, t.decisions, t.account_steps, t.images)),
        )
    console.print(table)
    console.print(f"each ATTEMPT/trajectory.json in {escape(str(summary.out_dir))}")
    console.print("account: the steps of the agent's own account (unverified)")
