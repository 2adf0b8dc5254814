"""`mailroom audit`, `disclose` and `cutover`: checking blinding and recording its failures.

The scan is `orchestrator/audit/scan.py`, the records `orchestrator/audit/disclosure.py`;
here are the commands and what they print.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from mailroom.orchestrator.audit.disclosure import (
    NoteError,
    UnknownAttemptError,
    bounded_note,
    disclosed_attempts,
    record_cutover,
    record_disclosure,
    resolve_attempt,
)
from mailroom.orchestrator.audit.scan import AUDIT_FILE, AuditError, AuditVerdict, audit_run
from mailroom.orchestrator.campaign.run_directory import RunDirectory
from mailroom.orchestrator.cli.exits import EXIT_LEAKS, EXIT_OK, EXIT_UNVERIFIABLE
from mailroom.orchestrator.cli.options import (
    console,
    json_option,
    para_dir_option,
    run_dir_argument,
    use_run_para_catalog,
)
from rich.markup import escape
from rich.table import Table

SHOWN_LEAKS = 50


def _run(run_dir: Path) -> RunDirectory:
    run = RunDirectory(run_dir)
    if not run.exists():
        raise click.UsageError(f"{run_dir} holds no manifest.json: not a run directory")
    return run


def _note(text: str) -> str:
    try:
        return bounded_note(text)
    except NoteError as exc:
        raise click.UsageError(f"--note {exc}") from exc


def _print_verdict(verdict: AuditVerdict, run: RunDirectory) -> None:
    if verdict.leaks:
        table = Table(title=f"blinding audit of {escape(verdict.run_id)}: leaks")
        for column in ("attempt", "where", "kind", "excerpt"):
            table.add_column(column, overflow="fold")
        for leak in verdict.leaks[:SHOWN_LEAKS]:
            table.add_row(
                escape(leak.attempt_id),
                escape(leak.where),
                leak.identifier_kind,
                escape(leak.excerpt),
            )
        console.print(table)
        hidden = len(verdict.leaks) - SHOWN_LEAKS
        if hidden > 0:
            console.print(f"... and {hidden} more (all of them in audit.json)")
        affected = {leak.attempt_id for leak in verdict.leaks}
        undisclosed = affected - disclosed_attempts(run)
        console.print(
            f"[red]{len(verdict.leaks)} leaks[/red] in {len(affected)} of "
            f"{verdict.attempts_scanned} attempts, {len(undisclosed)} of them not yet "
            "disclosed (`mailroom disclose RUN ATTEMPT --note ...`)"
        )
    for item in verdict.unverifiable:
        console.print(
            f"[yellow]unverifiable[/yellow] {escape(item.attempt_id)}: {escape(item.reason)}"
        )
    if verdict.clean:
        console.print(
            f"[green]clean[/green]: {verdict.attempts_scanned} attempts, "
            f"{verdict.files_scanned} endpoint files; nothing an actor could read names "
            "the run or its cases"
        )
    elif not verdict.leaks:
        console.print("no leak found, but not everything could be checked")
    console.print(f"verdict recorded in {run.root / AUDIT_FILE}")


@click.command()
@run_dir_argument(must_exist=False)
@json_option("Print the verdict document.")
@para_dir_option()
def audit(run_dir: Path, as_json: bool) -> None:
    """Search everything the run's actors could read for private identifiers.

    Exit codes: 0 clean; 6 leaks found; 8 nothing leaked but something could not be
    checked (e.g. an endpoint directory is gone); 2 usage error.
    """
    use_run_para_catalog(run_dir)
    run = _run(run_dir)
    try:
        verdict = audit_run(run_dir)
    except AuditError as exc:
        raise click.UsageError(str(exc)) from exc
    if as_json:
        sys.stdout.write(json.dumps(verdict.document(), indent=2) + "\n")
    else:
        _print_verdict(verdict, run)
    if verdict.leaks:
        sys.exit(EXIT_LEAKS)
    sys.exit(EXIT_OK if verdict.clean else EXIT_UNVERIFIABLE)


@click.command()
@run_dir_argument(must_exist=False)
@click.argument("case")
@click.option("--note", required=True, help="What reached the actor, and how.")
def disclose(run_dir: Path, case: str, note: str) -> None:
    """Record that private context reached the actor of CASE (an attempt id, or a case id
    for its latest attempt). The attempt stays in the results, marked not blinded, and
    is never re-run."""
    run = _run(run_dir)
    text = _note(note)
    try:
        record = resolve_attempt(run, case)
    except UnknownAttemptError as exc:
        raise click.UsageError(str(exc)) from exc
    record_disclosure(run, record, text)
    console.print(
        f"recorded: attempt {escape(record.attempt_id)} is not blinded; "
        "it stays in the results and is never re-run"
    )


@click.command()
@run_dir_argument(must_exist=False)
@click.option("--note", required=True, help="The correction, and from when it applies.")
def cutover(run_dir: Path, note: str) -> None:
    """Record a prospective operator correction, apart from the immutable manifest."""
    run = _run(run_dir)
    record_cutover(run, _note(note))
    console.print("recorded an operator cutover in the run's event log")


def register(group: click.Group) -> None:
    for command in (audit, disclose, cutover):
        group.add_command(command)
