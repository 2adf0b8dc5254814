"""`mailroom catalog` and `mailroom plan`: the frozen protocol catalog and selection plans."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import click
from mailroom.orchestrator.catalog.entries import CatalogError
from mailroom.orchestrator.catalog.plans import PLAN_KINDS, PlanError, write_plan
from mailroom.orchestrator.cli.family_options import (
    declared_copies,
    given_plan_options,
    local_copy_options,
    plan_options,
)
from mailroom.orchestrator.cli.options import console, json_option
from mailroom.orchestrator.families.base import BenchmarkFamily
from mailroom.orchestrator.families.plans import build_plan
from mailroom.orchestrator.families.registry import (
    DEFAULT_BENCHMARK,
    benchmark_names,
    families,
    family,
    family_of_suite,
)


def _json_out(document: object) -> None:
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def _refuse_foreign_options(chosen: BenchmarkFamily, options: dict[str, str]) -> None:
    """An option of another family's, given for this one's catalog."""
    taken = {o.name for o in chosen.plan_options}
    for name in options:
        if name in taken:
            continue
        owners = [f.title for f in families().values() if name in {o.name for o in f.plan_options}]
        title = owners[0] if owners else "no"
        raise click.UsageError(f"--{name} selects {title} tasks: give a {title} suite")


@click.command("catalog")
@json_option("Print the entries as one JSON document.")
@click.option("--suite", default=None, help="Only this suite (e.g. libero_10, libero_10_lan).")
@click.option(
    "--benchmark",
    type=click.Choice(benchmark_names()),
    default=None,
    help="Only this family (libero: the 130 standard entries; libero_pro; libero_plus; ...).",
)
@plan_options()
@local_copy_options()
@click.pass_context
def catalog(
    ctx: click.Context,
    /,
    as_json: bool,
    suite: str | None,
    benchmark: str | None,
    **given: str | None,
) -> None:
    """A benchmark family's catalog, as the family shows it: the frozen LIBERO catalog
    (suite-task entries in native order, with reference horizons and their sources) by
    default, another family's with `--benchmark` or one of its suites; a family's local
    copy (a LIBERO-Para folder, `--para-dir`) is catalogued from its files, each file
    matched to its task or refused with the reason."""
    options = given_plan_options(given)
    copies = declared_copies(ctx)
    try:
        if copies:
            if suite is not None or benchmark is not None or options:
                named = ", ".join(f"--{c.local_copy.option}" for c in copies if c.local_copy)
                raise click.UsageError(f"{named} takes no --suite, --benchmark or plan option")
            chosen = copies[0]
        elif suite is not None:
            chosen = family_of_suite(suite)
            if benchmark is not None and chosen.name != benchmark:
                raise click.UsageError(f"suite {suite!r} is not in benchmark {benchmark!r}")
        else:
            chosen = family(benchmark or DEFAULT_BENCHMARK)
        _refuse_foreign_options(chosen, options)
        chosen.show_catalog(
            console,
            _json_out,
            suite,
            options,
            as_json=as_json,
            only_this_family=benchmark is not None,
        )
    except CatalogError as exc:
        raise click.UsageError(str(exc)) from exc


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


def _init_states(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> list[int] | None:
    """Syntax and sign here; repeats and each task's range in `build_plan`."""
    if value is None:
        return None
    parts = [part.strip() for part in value.split(",")]
    if any(re.fullmatch(r"-[0-9]+", part) for part in parts):
        raise click.BadParameter(
            f"{value!r} names a negative state: released initial states count from 0"
        )
    if not all(re.fullmatch(r"[0-9]+", part) for part in parts):
        raise click.BadParameter(
            f"{value!r} is not a comma-separated list of released initial state indices "
            "(e.g. 0,1,2,3)"
        )
    return [int(part) for part in parts]


@click.command("plan")
@click.option("--kind", type=click.Choice(PLAN_KINDS), required=True, help="Which selection.")
@click.option("--suite", default=None, help="The suite (fast, task_coverage, canonical).")
@plan_options()
@local_copy_options()
@click.option(
    "--task-ids",
    callback=_task_ids,
    default=None,
    help="Comma-separated task indices, e.g. 0,1 (fast, development, task_coverage; "
    "for libero_para, LIBERO-Goal task indices).",
)
@click.option(
    "--init-states",
    callback=_init_states,
    default=None,
    help="task_coverage only: comma-separated released initial state indices, e.g. 0,1,2,3; "
    "each selected task runs from each (every task from the lowest state first). "
    "Default: state 0 alone.",
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
    init_states: list[int] | None,
    out: Path,
    force: bool,
    as_json: bool,
    **given: str | None,
) -> None:
    """Write a selection plan: each case attempted once, never retried. `canonical` is the
    field's protocol (every task of a suite x its 50 fixed initial states, seed 7; for a
    LIBERO-Plus suite, every offline task once). `fast` on a LIBERO-Plus suite is one
    offline task per category. `--init-states` makes a task_coverage plan run each task
    from several released initial states, to plan and compare several episodes of one
    task."""
    try:
        built = build_plan(
            kind,
            suite=suite,
            task_ids=task_ids,
            init_states=init_states,
            **given_plan_options(given),
        )
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
