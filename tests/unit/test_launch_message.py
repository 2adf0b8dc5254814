"""The launch message reaches the coordinator exactly as rendered: no wrapping, no
borders, no markup, whatever the terminal's width."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from mailroom.orchestrator.actors.instructions import render_instructions
from mailroom.orchestrator.cli.launch_console import print_launch_message
from rich.console import Console


@pytest.mark.parametrize("width", [40, 80, 200])
def test_the_printed_launch_message_is_the_rendered_text_byte_for_byte(width: int) -> None:
    text = render_instructions("/tmp/mailroom-x/0123456789abcdef0123456789abcdef")
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=False, color_system=None)
    copy = Path("/private/run/episodes/a-1/launch_message.json")
    print_launch_message(console, text, copy)
    lines = out.getvalue().split("\n")
    assert lines[0].startswith("----- launch message") and str(copy) in lines[0]
    end = lines.index("----- end of launch message -----")
    assert "\n".join(lines[1:end]) + "\n" == text
    assert "│" not in out.getvalue()


def test_markup_and_emoji_codes_in_the_text_stay_as_written() -> None:
    text = "keep [bold]this[/bold] and :smile: and [link=x]y[/link] as they are\n"
    out = io.StringIO()
    print_launch_message(Console(file=out, width=30, color_system=None), text, Path("/p"))
    assert out.getvalue().split("\n")[1] == text.rstrip("\n")
