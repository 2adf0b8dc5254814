"""`mailroom compare`: two runs paired on the cases they share."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from mailroom.orchestrator.cli.exits import EXIT_CONFLICT, EXIT_OK
from mailroom.orchestrator.cli.options import console, json_option
from mailroom.orchestrator.results.comparison import Comparison, PairedTally, paired_cost_text
from rich import box
from rich.markup import escape
from rich.table import Table


def _arm_text(tally: PairedTally, arm: str) -> str:
    rate = tally.a if arm == "a" else tally.b
    if rate.rate is None or rate.interval is None:
        return "n/a"
    return f"{rate.rate:.0%} ({rate.interval.low:.0%}-{rate.interval.high:.0%})"


def comparison_table(comparison: Comparison) -> Table:
    table = Table(
        title=f"A {comparison.run_a} vs B {comparison.run_b}",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 1),
    )
    table.add_column("suite", overflow="fold")
    for header in ("pairs", "A (95% int.)", "B (95% int.)", "A only", "B only", "p"):
        table.add_column(header, justify="right", no_wrap=True)
    rows: list[tuple[str, PairedTally]] = []
    for suite, tally in comparison.suites.items():
        rows.append((escape(suite), tally))
        rows += [
            (f"  {escape(key.removeprefix(suite + '/'))}", grouped)
            for key, grouped in comparison.groups.items()
            if key.startswith(f"{suite}/")
        ]
    for name, tally in [*rows, ("overall", comparison.overall)]:
        table.add_row(
            name,
            str(tally.paired),
            _arm_text(tally, "a"),
            _arm_text(tally, "b"),
            str(tally.only_a_succeeded),
            str(tally.only_b_succeeded),
            f"{tally.p_value:.3g}",
        )
    return table


def print_comparison(comparison: Comparison) -> None:
    console.print(comparison_table(comparison))
    console.print(
        "A only / B only: discordant pairs, where only that run succeeded; p: exact "
        "McNemar, two-sided; intervals: Wilson 95%",
        style="dim",
        highlight=False,
    )
    console.print(
        f"A: {escape(comparison.profile_a)}  B: {escape(comparison.profile_b)}", highlight=False
    )
    for name, tally in comparison.suites.items():
        console.print(f"{escape(name)}: {escape(tally.verdict)}", highlight=False)
    console.print(f"overall: {escape(comparison.overall.verdict)}", highlight=False)
    console.print(escape(paired_cost_text(comparison.cost)), highlight=False)
    left = []
    if comparison.only_in_a or comparison.only_in_b:
        left.append(f"{comparison.only_in_a} case(s) only in A, {comparison.only_in_b} only in B")
    if comparison.left_out_unattempted:
        left.append(f"{comparison.left_out_unattempted} shared case(s) unattempted in a run")
    if left:
        console.print("left out: " + "; ".join(left), highlight=False)
    if comparison.not_blinded_paired:
        console.print(
            f"[yellow]{comparison.not_blinded_paired} paired case(s) were not blinded in a "
            "run[/yellow]",
            highlight=False,
        )
    for name, (value_a, value_b) in comparison.settings_differences.items():
        console.print(
            f"[yellow]settings differ (allowed):[/yellow] {escape(name)}: "
            f"A {escape(repr(value_a))}, B {escape(repr(value_b))}",
            highlight=False,
        )


@click.command()
@click.argument("run_a", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.argument("run_b", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option(
    "--allow-different-settings",
    is_flag=True,
    help="Compare runs whose protocol settings or plan cases differ (the differences are named).",
)
@json_option("Print the comparison as JSON.")
def compare(run_a: Path, run_b: Path, allow_different_settings: bool, as_json: bool) -> None:
    """Pair RUN_A and RUN_B on the cases they share: both success rates with Wilson
    intervals, the discordant pairs and an exact McNemar p-value, per suite and overall;
    and what the cases priced in both runs cost each (totals, means per episode, B - A).

    Exit codes: 0 compared; 5 refused (protocol settings or plan cases differ, without
    --allow-different-settings); 2 usage error (not a run directory).
    """
    from mailroom.orchestrator.results.comparison import SettingsDifferError, compare_runs

    try:
        comparison = compare_runs(run_a, run_b, allow_different_settings=allow_different_settings)
    except SettingsDifferError as exc:
        console.print(
            f"[red]refused:[/red] {escape(str(exc))}; they measure different things "
            "(--allow-different-settings compares them anyway)",
            highlight=False,
        )
        sys.exit(EXIT_CONFLICT)
    except (OSError, ValueError, KeyError) as exc:
        raise click.UsageError(f"cannot compare: {exc}") from exc
    if as_json:
        sys.stdout.write(json.dumps(comparison.model_dump(mode="json"), indent=2) + "\n")
    else:
        print_comparison(comparison)
    sys.exit(EXIT_OK)
