"""No table the CLI prints shows a Python repr (None, True, a list): a value that is
absent, a flag or a collection is shown in words. Every cell added to a rich table is
checked while the commands print a kept run (report, status, export), the demo's
result with its optional fields absent, and the bench's tables with figures not
measured."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import REPO
from mailroom.orchestrator.cli import perf
from mailroom.orchestrator.cli.cells import cell
from mailroom.orchestrator.cli.main import _print_result, main
from mailroom.orchestrator.records.result import EpisodeResult
from mailroom.orchestrator.records.run_directory import RunDirectory
from rich.table import Table

KEPT = REPO / "tests" / "support" / "data" / "run_before_upgrade" / "diagnostic_at_7e2710c"
REPR = re.compile(r"\bNone\b|^(True|False)$|^\[['\"\d(\[]|^\{['\"]|^\(")


@pytest.fixture
def cells(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every cell added to a rich table meanwhile, as text."""
    added: list[str] = []
    original = Table.add_row

    def add_row(self: Table, *renderables: Any, **options: Any) -> None:
        added.extend(str(r) for r in renderables)
        original(self, *renderables, **options)

    monkeypatch.setattr(Table, "add_row", add_row)
    yield added


def _reprs(cells: list[str]) -> list[str]:
    return [c for c in cells if REPR.search(c)]


@pytest.fixture
def run(tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(KEPT, copy)
    return copy


def test_cell_words() -> None:
    assert cell(None) == "n/a"
    assert cell(None, missing="none") == "none"
    assert (cell(True), cell(False)) == ("yes", "no")
    assert cell([1, None, "a"]) == "1, —, a"  # inside a collection: the viewer's words
    assert cell([]) == "none"
    assert cell({"a": 1, "b": None}) == "a: 1, b: —"
    assert (cell(0), cell(2.5), cell("x")) == ("0", "2.5", "x")


@pytest.mark.parametrize("command", [("report",), ("status",), ("export", "--out", "{tmp}/export")])
def test_the_commands_on_a_kept_run_print_no_repr(
    run: Path, tmp_path: Path, cells: list[str], command: tuple[str, ...]
) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    done = CliRunner().invoke(main, [args[0], str(run), *args[1:]], terminal_width=200)
    assert done.exit_code == 0, done.output
    assert cells, "the command printed no table"
    assert _reprs(cells) == []


def test_the_demo_result_with_its_optional_fields_absent_prints_no_repr(
    run: Path, cells: list[str]
) -> None:
    (attempt,) = RunDirectory(run).attempts()
    assert isinstance(attempt.result, EpisodeResult)
    assert attempt.result.confinement is not None
    result = attempt.result.model_copy(
        update={
            "termination": None,
            "truncation": None,
            "confinement": attempt.result.confinement.model_copy(update={"network": None}),
        }
    )
    _print_result(result, run)
    assert _reprs(cells) == []
    shown = dict(zip(cells[::2], cells[1::2], strict=True))
    assert (shown["termination"], shown["truncation"]) == ("none", "none")
    assert shown["confinement"] == "sandbox (bubblewrap), network not recorded"


def test_the_bench_tables_with_figures_not_measured_print_no_repr(cells: list[str]) -> None:
    absent = {"p50_ms": None, "p95_ms": None}
    perf._print_phases({"phases": {"claim": absent}, "overhead": absent}, 5)
    perf._print_headline({key: None for key in perf.HEADLINE})
    side = {"decisions": None, "p50_ms": None, "p95_ms": None}
    flood_round = {
        "flooded": None,
        "queue_delay": {"flooded": side, "quiet": side},
        "rename_to_claim": {"flooded": side, "quiet": side},
        "watchers_fell_back": {"flooded": None, "quiet": None},
    }
    alone = {"details": {"flood": {"rounds": [flood_round]}}}
    perf._print_flood(alone)
    assert len(cells) > 10
    assert _reprs(cells) == []
