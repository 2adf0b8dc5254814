"""`mailroom report` and `status`: reading a run from its result documents."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from mailroom.orchestrator.cli.cells import cell
from mailroom.orchestrator.cli.exits import EXIT_INCOMPLETE, EXIT_OK
from mailroom.orchestrator.cli.options import console, json_option, run_dir_argument
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from mailroom.orchestrator.records.manifest import ProviderGatewayRecord
    from mailroom.orchestrator.replay.diagnostics import AttemptDiagnostics
    from mailroom.orchestrator.results.proportions import Interval
    from mailroom.orchestrator.results.reporter import Report, Tally
    from mailroom.orchestrator.results.usage import UsageSummary


# Short headers so the table fits an 80-column terminal; the legend gives the words.
COLUMNS: dict[str, str] = {
    "sel": "selected = compl + err + unatt",
    "compl": "completed = succ + fail",
    "succ": "success",
    "fail": "failure",
    "err": "errored (incl. interrupted, worker lost, corrupt)",
    "unatt": "unattempted",
    "rate/sel": "success rate over selected",
    "rate/compl": "success rate over completed",
    "unblind": "not blinded",
    "unconf": "not confined",
}
LEGEND_LINES: tuple[tuple[str, ...], ...] = (
    ("sel", "compl"),
    ("succ", "fail", "err"),
    ("unatt", "unblind", "unconf"),
    ("rate/sel", "rate/compl"),
)


def legend() -> list[str]:
    """What each short header means, a few headers a line."""
    return ["; ".join(f"{short} {COLUMNS[short]}" for short in line) for line in LEGEND_LINES]


def _percent(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.1%}"


def _row(name: str, t: Tally) -> list[str]:
    counts = (t.selected, t.completed, t.success, t.failure, t.errored, t.unattempted)
    rates = (t.success_rate_over_selected, t.success_rate_over_completed)
    return [
        name,
        *map(str, counts),
        *map(_percent, rates),
        str(t.not_blinded),
        str(t.not_confined),
    ]


def report_table(report: Report) -> Table:
    title = f"{report.run_id}  ({report.profile}, plan {report.plan_kind})"
    table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 0))
    # Only the suite's name may fold: a header is never cut.
    table.add_column("suite", overflow="fold")
    for short in COLUMNS:
        table.add_column(short, justify="right", min_width=len(short), no_wrap=True)
    for name, t in report_rows(report):
        table.add_row(*_row(name, t))
    return table


def report_rows(report: Report) -> list[tuple[str, Tally]]:
    """Each suite, its LIBERO-Plus categories or LIBERO-Para cells under it (indented),
    then overall; names escaped for the table's markup (a cell is a folder's name)."""
    return [
        (escape(suite) if group is None else f"  {escape(group)}", t)
        for suite, group, t in report.tally_rows()
    ]


def interval_text(interval: Interval | None) -> str:
    """`23.1-88.2%`, or n/a without cases."""
    if interval is None:
        return "n/a"
    return f"{interval.low:.1%}".rstrip("%") + f"-{interval.high:.1%}"


def rates_table(report: Report) -> Table:
    """Each suite's two success rates with their Wilson 95% intervals."""
    table = Table(
        title="success rates with Wilson 95% intervals",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 1),
    )
    table.add_column("suite", overflow="fold")
    for header in ("rate/sel", "95% interval", "rate/compl", "95% interval"):
        table.add_column(header, justify="right", no_wrap=True)
    for name, t in report_rows(report):
        table.add_row(
            name,
            _percent(t.success_rate_over_selected),
            interval_text(t.success_rate_over_selected_interval),
            _percent(t.success_rate_over_completed),
            interval_text(t.success_rate_over_completed_interval),
        )
    return table


def overall_lines(t: Tally) -> list[str]:
    """Both overall success rates in words, with their counts and intervals."""
    said = [
        f"overall success over selected: {t.success}/{t.selected} "
        f"({_percent(t.success_rate_over_selected)}, 95% interval "
        f"{interval_text(t.success_rate_over_selected_interval)})",
        f"overall success over completed: {t.success}/{t.completed} "
        f"({_percent(t.success_rate_over_completed)}, 95% interval "
        f"{interval_text(t.success_rate_over_completed_interval)})",
    ]
    if t.unattempted:
        running = f" ({t.in_progress} running now)" if t.in_progress else ""
        said.append(
            f"incomplete: {t.unattempted} of {t.selected} selected cases unattempted{running}"
        )
    if t.unrecorded:
        said.append(
            f"{t.unrecorded} errored cases were interrupted before a result was written "
            "(an actor saw them): `mailroom resume` records them, never re-runs them"
        )
    return said


# The report's simulator labels that need words beside them in a line.
SIMULATOR_WORDS: dict[str, str] = {
    "none": "none (never started)",
    "unknown": "unknown (results before v5)",
}


def simulators_line(simulators: dict[str, int]) -> str:
    """`simulators: 180 parked, 20 dedicated`: the cases with a result by how their
    simulator was held."""
    said = ", ".join(f"{n} {SIMULATOR_WORDS.get(label, label)}" for label, n in simulators.items())
    return f"simulators: {said or 'no result yet'}"


def limits_line(limits: dict[str, dict[str, int]]) -> str:
    """`limits: memory enforced in 12 of 12 results; writable space bounded by the kernel
    in 12 of 12`: the cases with a result by whether the kernel enforced their actor's
    limits, results before v6 said apart as unknown."""
    memory = limits.get("memory", {})
    space = limits.get("writable_space", {})
    results = sum(memory.values())
    if not results:
        return "limits: no result yet"
    unknown = memory.get("unknown", 0)
    said = (
        f"limits: memory enforced in {memory.get('enforced', 0)} of {results} results; "
        f"writable space bounded by the kernel in {space.get('kernel', 0)} of {results}"
    )
    return said + (f" ({unknown} unknown: results before v6)" if unknown else "")


def print_report(report: Report, out: Console = console) -> None:
    out.print(report_table(report))
    for line in legend():
        out.print(line, style="dim", highlight=False)
    out.print(rates_table(report))
    for line in overall_lines(report.overall):
        out.print(line, highlight=False)
    if not report.capability_score:
        out.print("[yellow]diagnostic profile: infrastructure evidence, not a capability score")
    modes = ", ".join(f"{mode} {n}" for mode, n in report.confinement_modes.items()) or "none yet"
    out.print(f"confinement of the attempts: {modes}", highlight=False)
    out.print(escape(simulators_line(report.simulators)), highlight=False)
    out.print(escape(limits_line(report.limits)), highlight=False)
    if report.not_confined_attempts:
        out.print(
            f"[yellow]{len(report.not_confined_attempts)} attempts were NOT confined[/yellow] "
            "(run unconfined with --confinement none, started externally, or recorded before "
            "confinement existed): their actors could read what the evaluator's user can, "
            "so their results were not confined",
            highlight=False,
        )
    for bad in report.corrupt_results:
        out.print(
            f"[red]corrupt result, counted as errored:[/red] "
            f"{escape(bad['file'])}: {escape(bad['reason'])}",
            highlight=False,
        )
    print_usage(report, out)


def usage_table(u: UsageSummary) -> Table:
    """The metered totals and their means per metered episode (`u.metered` > 0)."""
    from mailroom.orchestrator.results.usage import count_text, usd_text
    from mailroom.orchestrator.viewer.readable import readable_duration_ms

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1))
    table.add_column(f"metered usage ({u.metered} episodes)", overflow="fold")
    table.add_column("total", justify="right", no_wrap=True)
    table.add_column("per episode", justify="right", no_wrap=True)
    rows: list[tuple[str, str, str]] = [
        ("requests forwarded", count_text(u.provider_requests), count_text(u.requests_per_episode)),
        ("  failed (provider fault)", count_text(u.failed_requests), ""),
        ("  without complete usage", count_text(u.unmetered_requests), ""),
        ("requests refused", count_text(u.refused_requests), ""),
        ("input tokens", count_text(u.input_tokens), count_text(u.input_tokens_per_episode)),
        ("output tokens", count_text(u.output_tokens), count_text(u.output_tokens_per_episode)),
        ("cache-read tokens", count_text(u.cache_read_tokens), ""),
        ("cache-write tokens", count_text(u.cache_write_tokens), ""),
        ("server tool uses", count_text(u.server_tool_uses), ""),
        (
            "provider time",
            readable_duration_ms(u.provider_time_ms),
            readable_duration_ms(u.provider_time_ms_per_episode),
        ),
        ("cost (USD)", usd_text(u.cost_usd), usd_text(u.cost_per_episode_usd)),
    ]
    for row in rows:
        table.add_row(*row)
    return table


def models_table(u: UsageSummary) -> Table:
    """Each answering model's share; its name is what the provider said (escaped)."""
    from mailroom.orchestrator.results.usage import count_text, usd_text

    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 1),
        caption="ep. episodes it answered in; req. requests; in/out: tokens",
        caption_justify="left",
    )
    table.add_column("answering model", overflow="fold")
    for header in ("ep.", "req.", "in", "out", "USD"):
        table.add_column(header, justify="right", no_wrap=True)
    for m in u.models:
        table.add_row(
            escape(m.model),
            str(m.episodes),
            count_text(m.requests),
            count_text(m.input_tokens),
            count_text(m.output_tokens),
            usd_text(m.cost_usd),
        )
    return table


SOURCE_SHOWN = 80  # characters of a price table's source in the report


def price_table_line(gateway: ProviderGatewayRecord) -> str:
    """Where the run's costs come from: the provider and its price table."""
    table = gateway.price_table
    whose = "the coordinator's file" if table.user_file else "the built-in table"
    # Its source (URLs, notes) can run to pages: the first words, the rest in --json.
    source = (
        table.source
        if len(table.source) <= SOURCE_SHOWN
        else (table.source[: SOURCE_SHOWN - 1].rstrip() + "…")
    )
    return (
        f"prices: {gateway.provider}, {whose} ({source}), retrieved "
        f"{table.retrieved} (sha256 {table.sha256[:12]}; its source in full: --json)"
    )


def print_usage(report: Report, out: Console = console) -> None:
    """The provider usage section: what was metered and what was not (never a zero for
    nothing metered), its cost per episode and per success, per answering model, the
    gateway's typed endings, and a run whose actors had the host's network."""
    from mailroom.orchestrator.results.usage import (
        cost_text,
        endings_text,
        host_network_text,
        metered_text,
        usd_text,
        verified_text,
    )

    u = report.overall.provider_usage
    out.print(escape(metered_text(u)), highlight=False)
    if u.metered:
        out.print(usage_table(u))
        for said in (cost_text(u), verified_text(u)):
            if said is not None:
                out.print(escape(said), highlight=False)
        out.print(models_table(u))
    if report.provider_gateway is not None:
        out.print(escape(price_table_line(report.provider_gateway)), highlight=False)
    if report.provider_gateway_problem is not None:
        out.print(f"[yellow]{escape(report.provider_gateway_problem)}[/yellow]", highlight=False)
    for said in endings_text(u):
        out.print(escape(said), highlight=False)
    host = host_network_text(u, report.network)
    if host is not None:
        out.print(f"[yellow]{escape(host)}[/yellow]", highlight=False)
    spent = report.superseded_usage
    if spent.metered:
        out.print(
            f"superseded attempts (in no rate): {spent.metered} of {spent.results} metered, "
            f"{spent.provider_requests} requests, {usd_text(spent.cost_usd)}",
            highlight=False,
        )


def print_diagnostics(found: list[AttemptDiagnostics], out: Console = console) -> None:
    """Goal predicates per attempt, from `mailroom replay`: labelled, apart, never a rate."""
    table = Table(
        title="post-episode diagnostics (from mailroom replay): never a score",
        box=box.SIMPLE_HEAD,
        show_edge=False,
    )
    table.add_column("attempt", overflow="fold")
    table.add_column("goal predicate", overflow="fold")
    table.add_column("first held", justify="right", no_wrap=True)
    table.add_column("at end", no_wrap=True)
    for diagnostics in found:
        for p in diagnostics.predicates:
            first = "never" if p.first_held_control is None else f"control {p.first_held_control}"
            table.add_row(
                escape(diagnostics.attempt_id),
                escape(p.predicate),
                first,
                "held" if p.held_at_end else "not held",
            )
    out.print(table)
    if not found:
        out.print("no diagnostics yet: `mailroom replay RUN_DIR` computes them", highlight=False)


@click.command()
@run_dir_argument()
@click.option(
    "--diagnostics",
    is_flag=True,
    help="Also show the post-episode goal-predicate diagnostics `mailroom replay` wrote "
    "(labelled apart; never a score).",
)
@json_option()
def report(run_dir: Path, diagnostics: bool, as_json: bool) -> None:
    """Success per suite with its denominators, from the result documents alone."""
    from mailroom.orchestrator.records.run_directory import RunDirectory
    from mailroom.orchestrator.replay.diagnostics import run_diagnostics
    from mailroom.orchestrator.results.reporter import build_report, report_json

    try:
        built = build_report(run_dir)
    except (OSError, ValueError, KeyError) as exc:
        raise click.UsageError(f"cannot report on {run_dir}: {exc}") from exc
    found = run_diagnostics(RunDirectory(run_dir)) if diagnostics else []
    if as_json:
        document = json.loads(report_json(built))
        if diagnostics:
            document["diagnostics"] = [d.document() for d in found]
        sys.stdout.write(json.dumps(document, indent=2, sort_keys=True) + "\n")
    else:
        print_report(built)
        if diagnostics:
            print_diagnostics(found)
    sys.exit(EXIT_OK if built.complete and not built.corrupt_results else EXIT_INCOMPLETE)


@click.command()
@run_dir_argument()
@json_option()
def status(run_dir: Path, as_json: bool) -> None:
    """Where a run stands: selected, completed, errored, unattempted (in the report's
    words), and as a launch sees them: live now, queued for a slot, done."""
    from mailroom.orchestrator.records.run_directory import RunDirectory, not_a_run_directory
    from mailroom.orchestrator.results.reporter import run_status

    run = RunDirectory(run_dir)
    if not run.exists():
        raise click.UsageError(not_a_run_directory(run_dir))
    state = run_status(run)
    if as_json:
        sys.stdout.write(json.dumps(state, indent=2) + "\n")
    else:
        table = Table(title=f"status of {run_dir.name}")
        table.add_column("what")
        table.add_column("cases", justify="right")
        for key, value in state.items():
            table.add_row(key.replace("_", " "), cell(value))
        console.print(table)
    done = state["unattempted"] == 0
    sys.exit(EXIT_OK if done else EXIT_INCOMPLETE)
