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
    record_cutover,
    record_disclosure,
    resolve_attempt,
)
from mailroom.orchestrator.audit.scan import audit_run
from mailroom.orchestrator.audit.verdict import AuditError, AuditVerdict, Information
from mailroom.orchestrator.cli.exits import EXIT_LEAKS, EXIT_OK, EXIT_UNVERIFIABLE
from mailroom.orchestrator.cli.family_options import local_copy_options
from mailroom.orchestrator.cli.options import (
    console,
    json_option,
    run_dir_argument,
    use_run_catalog,
)
from mailroom.orchestrator.records.disclosures import disclosed_attempts
from mailroom.orchestrator.records.layout import AUDIT_FILE
from mailroom.orchestrator.records.run_directory import RunDirectory, not_a_run_directory
from rich.markup import escape
from rich.table import Table

SHOWN_LEAKS = 50
SHOWN_INFORMATION = 30
INFORMATION_COLUMNS = 80  # the information table fits a terminal this narrow


def _run(run_dir: Path) -> RunDirectory:
    run = RunDirectory(run_dir)
    if not run.exists():
        raise click.UsageError(not_a_run_directory(run_dir))
    return run


def _note(text: str) -> str:
    try:
        return bounded_note(text)
    except NoteError as exc:
        raise click.UsageError(f"--note {exc}") from exc


def _print_leaks(verdict: AuditVerdict, run: RunDirectory) -> None:
    table = Table(title=f"blinding audit of {escape(verdict.run_id)}: leaks")
    for column in ("attempt", "where", "source", "kind", "excerpt"):
        table.add_column(column, overflow="fold")
    for leak in verdict.leaks[:SHOWN_LEAKS]:
        table.add_row(
            escape(leak.attempt_id),
            escape(leak.where),
            leak.source or "",  # a v1 verdict's leak does not say
            leak.identifier_kind,
            escape(leak.excerpt),
        )
    console.print(table)
    hidden = len(verdict.leaks) - SHOWN_LEAKS
    if hidden > 0:
        console.print(f"... and {hidden} more (all of them in {AUDIT_FILE})")
    affected = {leak.attempt_id for leak in verdict.leaks}
    undisclosed = affected - disclosed_attempts(run)
    console.print(
        f"[red]{len(verdict.leaks)} leaks[/red] in {len(affected)} of "
        f"{verdict.attempts_scanned} attempts, {len(undisclosed)} of them not yet "
        "disclosed (`mailroom disclose RUN ATTEMPT --note ...`)"
    )


def _print_information(information: list[Information]) -> None:
    """One row per place and kind, over all attempts (agent CLIs write the same state
    files in every attempt), with the first excerpt found there."""
    places: dict[tuple[str, str], list[Information]] = {}
    for item in information:
        places.setdefault((item.where, item.kind), []).append(item)
    table = Table(title="information, not failing: what actors wrote that they could know untold")
    table.add_column("where", overflow="fold", ratio=3)
    table.add_column("kind", no_wrap=True)
    table.add_column("attempts", justify="right", no_wrap=True)
    table.add_column("first excerpt", overflow="fold", ratio=4)
    for (where, kind), items in sorted(places.items())[:SHOWN_INFORMATION]:
        count = len({item.attempt_id for item in items})
        table.add_row(escape(where), kind, str(count), escape(items[0].excerpt))
    console.print(table, width=min(console.width, INFORMATION_COLUMNS))
    hidden = len(places) - SHOWN_INFORMATION
    if hidden > 0:
        console.print(f"... and {hidden} more places (all of them in {AUDIT_FILE})")
    affected = len({item.attempt_id for item in information})
    findings = "finding" if len(information) == 1 else "findings"
    of = "attempt" if affected == 1 else "attempts"
    console.print(
        f"{len(information)} information {findings} in {affected} {of}: a date or "
        "the benchmark's name an actor wrote itself, which it can know untold; not a leak"
    )


def _print_verdict(verdict: AuditVerdict, run: RunDirectory) -> None:
    if verdict.information:
        _print_information(verdict.information)
    if verdict.leaks:
        _print_leaks(verdict, run)
    for item in verdict.unverifiable:
        console.print(
            f"[yellow]unverifiable[/yellow] {escape(item.attempt_id)}: {escape(item.reason)}"
        )
    if verdict.clean:
        aside = " beyond what it can know untold" if verdict.information else ""
        console.print(
            f"[green]clean[/green]: {verdict.attempts_scanned} attempts, "
            f"{verdict.files_scanned} endpoint files; nothing an actor could read names "
            f"the run or its cases{aside}"
        )
    elif not verdict.leaks:
        console.print("no leak found, but not everything could be checked")
    console.print(f"verdict recorded in {escape(str(run.paths.audit))}")


@click.command()
@run_dir_argument(must_exist=False)
@json_option("Print the verdict document.")
@local_copy_options()
def audit(run_dir: Path, as_json: bool) -> None:
    """Search everything the run's actors could read for private identifiers.

    What was handed to an actor (argv, environment, instructions, its endpoint's path,
    outbox/) must name nothing private. What an actor wrote itself (inbox/, scratch/) is
    judged by what it could know untold: a date or the benchmark's name there is listed
    as information and fails nothing; anything else private there is a leak.

    Exit codes: 0 clean (information alone is clean); 6 leaks found; 8 nothing leaked
    but something could not be checked (e.g. an endpoint directory is gone); 2 usage
    error.
    """
    use_run_catalog(run_dir)
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
