"""`mailroom catalog` for a LIBERO-Para copy: paraphrases per cell and Goal task, and
every refusal with its reason."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mailroom.benchmarks.libero_para.local_copy import (
    para_catalog_sha256,
    para_document,
    read_para_copy,
)
from rich.console import Console
from rich.markup import escape
from rich.table import Table


def show_para_catalog(
    console: Console, write_json: Callable[[object], None], para_dir: Path, as_json: bool
) -> None:
    """A LIBERO-Para copy: paraphrases per cell and Goal task, and every refusal."""
    found = read_para_copy(para_dir)
    if as_json:
        write_json(para_document(found))
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
