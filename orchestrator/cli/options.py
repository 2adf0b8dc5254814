"""What every `mailroom` command shares: the console and the options many commands take."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click
from rich.console import Console

# Human output goes to stderr so that `--json` documents alone reach stdout.
console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., object])


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
