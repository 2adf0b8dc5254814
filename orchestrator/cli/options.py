"""What every `mailroom` command shares: the console and the options many commands take."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar, get_args

import click
from mailroom.mailbox.watcher import WatchMode
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

# Human output goes to stderr so that `--json` documents alone reach stdout.
console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., object])


# Where a run goes when no --run-dir is given: under the current folder, one folder per
# profile (never inside the profile's own folder, which may be an installed package's).
RUNS_FOLDER = Path("runs")


def default_run_dir(profile: str, label: str = "run") -> Path:
    """A new run directory `runs/<profile>/<label>-<UTC time>-<4 hex>`, not yet made."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return (RUNS_FOLDER / profile / f"{label}-{stamp}-{secrets.token_hex(2)}").absolute()


def json_option(
    help_text: str = "Print the result as one JSON document on stdout.",
) -> Callable[[F], F]:
    """`--json`: a document on stdout for scripts; the human output stays on stderr."""
    return click.option("--json", "as_json", is_flag=True, help=help_text)


def run_dir_argument(*, must_exist: bool = True) -> Callable[[F], F]:
    """RUN_DIR, a run directory (its manifest is checked by the command itself)."""
    return click.argument(
        "run_dir", type=click.Path(path_type=Path, exists=must_exist, file_okay=False)
    )


def run_dir_option(help_text: str) -> Callable[[F], F]:
    """`--run-dir`: the run's private directory (never under the mailbox root)."""
    return click.option("--run-dir", type=click.Path(path_type=Path), default=None, help=help_text)


def mailbox_root_option(
    help_text: str = "Where endpoints are created (default: a new temporary directory).",
) -> Callable[[F], F]:
    """`--mailbox-root`: where the opaque endpoints live (traversable by actors)."""
    return click.option(
        "--mailbox-root", type=click.Path(path_type=Path), default=None, help=help_text
    )


def watch_mode_option() -> Callable[[F], F]:
    """`--watch-mode`: how responses are detected (`mailroom.mailbox.watcher.WatchMode`)."""
    return click.option(
        "--watch-mode",
        type=click.Choice(list(get_args(WatchMode))),
        default="inotify",
        show_default=True,
        help="How responses are detected: inotify events, or polling the inbox.",
    )


def confinement_option(help_text: str, default: str | None) -> Callable[[F], F]:
    """`--confinement`: the sandbox, or explicitly none (every result says which)."""
    return click.option(
        "--confinement",
        type=click.Choice(["sandbox", "none"]),
        default=default,
        show_default=default is not None,
        help=help_text,
    )


def use_run_catalog(run_dir: Path) -> None:
    """A command reading a run uses the catalog the run kept (checked against its
    manifest), whatever a declared copy holds now: a published run is re-read, and
    re-proved, without the data set (families/kept.py; the library calls pin it too,
    this says a disagreeing file as a usage error before anything starts)."""
    from mailroom.orchestrator.catalog.entries import CatalogError
    from mailroom.orchestrator.families.kept import pin_run_catalog

    try:
        pin_run_catalog(run_dir)
    except CatalogError as exc:
        raise click.UsageError(str(exc)) from exc


def progress_bar(*, hidden: bool) -> Progress:
    """The bar of a long command (described, n of N, elapsed), on stderr; `hidden` for
    `--json`, whose stdout carries the document alone."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=hidden,
    )
