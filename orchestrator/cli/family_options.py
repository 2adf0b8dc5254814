"""The command-line options the registered families declare, made by the core.

A family's plan options (a LIBERO-Plus `--category`, a LIBERO-Para `--cell`) and the
local copy it reads (LIBERO-Para's `--para-dir`) are declared in its own folder
(`BenchmarkFamily.plan_options`, `.local_copy`); the commands take them from here, so no
command names a family's option.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource
from mailroom.orchestrator.catalog.entries import CatalogError
from mailroom.orchestrator.families.base import BenchmarkFamily
from mailroom.orchestrator.families.registry import families

F = TypeVar("F", bound=Callable[..., Any])
# Where a command finds the families whose copy its options declared (`declared_copies`).
DECLARED = "mailroom.declared_copies"


def _plan_option(name: str) -> Callable[[F], F]:
    owners = [f for f in families().values() if name in {o.name for o in f.plan_options}]
    declared = [o for f in owners for o in f.plan_options if o.name == name]
    choices = [c for o in declared for c in (o.choices or ())]
    # A choice list only when every family taking the option lists its values.
    kind = (
        click.Choice(tuple(dict.fromkeys(choices)))
        if all(o.choices for o in declared)
        else click.STRING
    )
    titles = ", ".join(f.title for f in owners)
    return click.option(
        f"--{name.replace('_', '-')}",
        name,
        type=kind,
        default=None,
        help=f"{titles} only: {declared[0].help}.",
    )


def plan_option_names() -> tuple[str, ...]:
    """Every registered family's plan option names, each once, in registration order."""
    return tuple(dict.fromkeys(o.name for f in families().values() for o in f.plan_options))


def plan_options() -> Callable[[F], F]:
    """A command takes every family's plan options, each as a keyword of its own."""

    def decorate(command: F) -> F:
        for name in reversed(plan_option_names()):
            command = _plan_option(name)(command)
        return command

    return decorate


def given_plan_options(values: dict[str, Any]) -> dict[str, str]:
    """The plan options a command was given (its keywords named by `plan_option_names`)."""
    return {n: str(values[n]) for n in plan_option_names() if values.get(n) is not None}


def _declare(chosen: BenchmarkFamily) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Path | None) -> None:
        if value is None:
            return
        try:
            chosen.declare_local_copy(value)
        except CatalogError as exc:
            raise click.BadParameter(str(exc)) from exc
        # Given on the command line, not only set in the environment: what `catalog`
        # shows instead of the default family's catalog.
        if param.name and ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE:
            ctx.meta.setdefault(DECLARED, []).append(chosen)

    return callback


def local_copy_options() -> Callable[[F], F]:
    """`--<copy> DIR` for each family that reads a local copy: declared for this command
    and the workers it starts."""

    def decorate(command: F) -> F:
        readers = [f for f in families().values() if f.local_copy is not None]
        for reader in reversed(readers):
            assert reader.local_copy is not None
            command = click.option(
                f"--{reader.local_copy.option}",
                type=click.Path(path_type=Path, exists=True, file_okay=False),
                default=None,
                envvar=reader.local_copy.environment,
                show_envvar=reader.local_copy.environment is not None,
                expose_value=False,
                callback=_declare(reader),
                help=reader.local_copy.help,
            )(command)
        return command

    return decorate


def declared_copies(ctx: click.Context) -> list[BenchmarkFamily]:
    """The families whose local copy this command's options declared on its command line
    (a copy named only by its environment variable is declared, but not listed here)."""
    found: list[BenchmarkFamily] = ctx.meta.get(DECLARED, [])
    return found
