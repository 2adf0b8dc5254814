"""Text read from a run's evidence, as a page shows it: escaped element text in a
`pre` (never an attribute), with how much of it was cut said beside it.

An actor wrote most of it (its responses, its captured output, its own account), and a
damaged run may hold torn or foreign lines: all of it is untrusted, and none of it is
passed through `readable.py` (it is shown as it was written).
"""

from __future__ import annotations

from mailroom.orchestrator.actors.agent_trace import Clipped
from mailroom.orchestrator.viewer.markup import esc
from mailroom.orchestrator.viewer.timeline import ShownText


def untrusted_pre(text: str) -> str:
    return f'<pre class="untrusted">{esc(text)}</pre>'


def shown_text(shown: ShownText | None, what: str) -> str:
    if shown is None:
        return f'<p class="missing">no {esc(what)} kept</p>'
    note = (
        f'<p class="note">first {len(shown.text.encode())} of {shown.size} bytes shown</p>'
        if shown.truncated
        else ""
    )
    return f"{untrusted_pre(shown.text)}{note}"


def clipped_text(shown: Clipped) -> str:
    note = (
        f'<p class="note">cut: the first {len(shown.text)} of {len(shown.text) + shown.omitted}'
        " characters shown</p>"
        if shown.cut
        else ""
    )
    return f"{untrusted_pre(shown.text)}{note}"
