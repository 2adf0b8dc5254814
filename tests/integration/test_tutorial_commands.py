"""The tutorial's commands are real: every `mailroom` command it shows parses against the
command line as it is now (no unknown option, no bad value), and those that need no
simulator and no earlier run (`catalog`, `plan`) run here and print what the tutorial
shows."""

from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path

import click
import pytest
from conftest import REPO, run_cli
from mailroom.orchestrator.cli.main import main

TUTORIAL = REPO / "docs" / "tutorial.md"
TABLE = re.compile(r"[\u2500-\u257f]")  # box drawing
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(kind: str) -> list[str]:
    return [body for found, body in BLOCK.findall(TUTORIAL.read_text("utf-8")) if found == kind]


def commands() -> list[list[str]]:
    """Each `.venv/bin/mailroom ...` line of the tutorial's bash blocks, as arguments."""
    found = []
    for body in blocks("bash"):
        for line in body.splitlines():
            if line.startswith(".venv/bin/mailroom "):
                found.append(shlex.split(line, comments=True)[1:])
    return found


COMMANDS = commands()


def test_the_tutorial_shows_the_five_quick_start_commands_and_more() -> None:
    shown = {args[0] for args in COMMANDS}
    assert {"plan", "launch", "status", "report", "view", "compare"} <= shown


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(a) for a in COMMANDS])
def test_every_command_parses_as_the_cli_is_now(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert isinstance(main, click.Group)
    command = main.commands[args[0]]
    # The files and run directories it names, as earlier steps would have left them.
    monkeypatch.chdir(tmp_path)
    for arg in args[1:]:
        if arg.endswith(".json"):
            (tmp_path / arg).write_text("{}", encoding="utf-8")
        elif arg.startswith("runs/"):
            (tmp_path / arg).mkdir(parents=True, exist_ok=True)
    # Parsing only: a bad option or value raises a usage error here.
    with command.make_context(args[0], list(args[1:])) as ctx:
        assert ctx.command is command


def shown_runs() -> list[tuple[list[list[str]], str]]:
    """Each bash block of `catalog`/`plan` commands with the text block that follows it:
    what the tutorial says they print."""
    pairs = []
    found = BLOCK.findall(TUTORIAL.read_text("utf-8"))
    for (kind, body), (after, printed) in itertools.pairwise(found):
        lines = [x for x in body.splitlines() if x.strip()]
        if kind != "bash" or after != "text":
            continue
        if not all(x.startswith(".venv/bin/mailroom ") for x in lines):
            continue
        runs = [shlex.split(x, comments=True)[1:] for x in lines]
        if all(a[0] in ("catalog", "plan") for a in runs):
            pairs.append((runs, printed))
    return pairs


def test_catalog_and_plan_print_what_the_tutorial_shows(tmp_path: Path) -> None:
    pairs = shown_runs()
    assert len(pairs) >= 2
    for runs, shown in pairs:
        printed = ""
        for args in runs:
            done = run_cli(*args, cwd=tmp_path)
            assert done.returncode == 0, done.stderr
            printed += done.stdout + done.stderr
        said = {line.strip() for line in printed.splitlines()}
        # Every line the tutorial shows is printed, but for table rows (they wrap to
        # the terminal's width) and what it cut ("...").
        for line in shown.splitlines():
            line = line.strip()
            if line and line != "..." and not TABLE.search(line):
                assert line in said, line
