"""What every `mailroom` command shares: the console and exit codes."""

from __future__ import annotations

from rich.console import Console

# Human output goes to stderr so that `--json` documents alone reach stdout.
console = Console(stderr=True)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_EPISODE_ERROR = 3
