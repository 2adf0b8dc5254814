"""A scripted mailbox driver: the "model" behind the stand-in providers.

Given the conversation so far (the first user prompt, which holds the rendered actor
instructions, and the text of every tool result), it chooses the agent's next move: a
shell command for the agent's own shell tool, or a final text answer. It keeps no state
of its own: everything is derived from the conversation, so concurrent agents each get
their own episode.

The commands print a marker line first (`@@ obs 3`, `@@ closed`, `@@ waiting 3`,
`@@ wrote 3`), which is how a later tool result is recognised whatever framing the
agent puts around a command's output.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

ENDPOINT_LINE = re.compile(r"^Your endpoint directory: (/.*\S)[ \t]*$", re.MULTILINE)
# A marker starts its line, or follows a short label an agent puts before a command's
# output on the same line (Gemini CLI's "Output: ").
MARKER = re.compile(
    r"^(?:[A-Za-z ]{1,20}: )?@@ (obs|closed|waiting|wrote)(?: (\d+))?\s*$", re.MULTILINE
)
SMALL_ACTION: tuple[float, ...] = (0.0, 0.0, 0.1, 0.0, 0.0, 0.0, -1.0)
FINAL_TEXT = "The episode is over: closed.json appeared, so I stop here."
NO_ENDPOINT_TEXT = "I found no endpoint directory in the instructions, so I cannot start."
GAVE_UP_TEXT = "No observation appeared for a long time, so I stop waiting."
TOO_LONG_TEXT = "This conversation has gone on too long, so I stop here."


@dataclass(frozen=True)
class DriverSettings:
    """How the scripted agent behaves."""

    act_decisions: int = 3  # answer observations 1..N with "act", later ones with "stop"
    action: tuple[float, ...] = SMALL_ACTION
    chunk_cap: int | None = None  # None: the observation's action_spec max_chunk
    wait_s: float = 25.0  # one waiting command's bound
    poll_s: float = 0.1
    max_waits: int = 40  # consecutive waits without news before giving up
    max_tool_results: int = 500  # a conversation this long ends (a runaway loop)
    # Commands without `$(...)` or backquotes (Gemini CLI refuses a command substitution).
    substitution_free: bool = False


@dataclass(frozen=True)
class Conversation:
    """What the driver reads: the first user prompt and the tool results, in order."""

    prompt: str
    tool_results: Sequence[str] = field(default_factory=tuple)


@dataclass(frozen=True)
class ShellCommand:
    command: str
    purpose: str  # "wait" or "respond", for the record


@dataclass(frozen=True)
class FinalText:
    text: str


Move = ShellCommand | FinalText


@dataclass(frozen=True)
class Observed:
    """One tool result as recognised by its marker."""

    kind: str  # "obs", "closed", "waiting", "wrote" or "unknown"
    sequence: int | None = None
    document: dict[str, Any] | None = None


def endpoint_of(prompt: str) -> str | None:
    """The endpoint path the rendered instructions name, if any."""
    match = ENDPOINT_LINE.search(prompt)
    return match.group(1).rstrip("/") if match else None


def _first_json_object(text: str) -> dict[str, Any] | None:
    start = text.find("{")
    while start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        return value if isinstance(value, dict) else None
    return None


def read_result(text: str) -> Observed:
    """Classify one tool result by the last marker it carries."""
    markers = list(MARKER.finditer(text))
    if not markers:
        return Observed("unknown")
    marker = markers[-1]
    kind = marker.group(1)
    sequence = int(marker.group(2)) if marker.group(2) else None
    if kind in ("obs", "closed"):
        return Observed(kind, sequence, _first_json_object(text[marker.end() :]))
    return Observed(kind, sequence)


def wait_command(endpoint: str, sequence: int, settings: DriverSettings) -> str:
    """Wait (bounded) for obs-<n>.json or closed.json and print whichever came."""
    outbox = shlex.quote(f"{endpoint}/outbox")
    polls = max(1, round(settings.wait_s / settings.poll_s))
    obs = f"{outbox}/obs-{sequence}.json"
    closed = f"{outbox}/closed.json"
    if settings.substitution_free:
        waiting = (
            f'timeout {settings.wait_s:g} sh -c "until [ -e {obs} ] || [ -e {closed} ]; '
            f'do sleep {settings.poll_s:g}; done"; '
        )
    else:
        waiting = (
            f"i=0; while [ ! -e {obs} ] && [ ! -e {closed} ] && [ $i -lt {polls} ]; "
            f"do sleep {settings.poll_s:g}; i=$((i+1)); done; "
        )
    return (
        waiting + f"if [ -e {closed} ]; then echo '@@ closed'; cat {closed}; echo; "
        f"elif [ -e {obs} ]; then echo '@@ obs {sequence}'; cat {obs}; echo; "
        f"else echo '@@ waiting {sequence}'; fi"
    )


def response_document(
    observation: dict[str, Any], sequence: int, settings: DriverSettings
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "schema": "mailroom.response/v1",
        "request_id": str(observation.get("request_id", "")),
    }
    if sequence > settings.act_decisions:
        document["decision"] = "stop"
        return document
    spec = observation.get("action_spec")
    max_chunk = spec.get("max_chunk") if isinstance(spec, dict) else None
    length = max_chunk if isinstance(max_chunk, int) and max_chunk > 0 else 1
    if settings.chunk_cap is not None:
        length = max(1, min(length, settings.chunk_cap))
    document["decision"] = "act"
    document["actions"] = [list(settings.action) for _ in range(length)]
    return document


def respond_command(endpoint: str, sequence: int, document: dict[str, Any]) -> str:
    """Write the response atomically, exactly as the instructions show."""
    text = json.dumps(document, separators=(", ", ": "))
    temporary = shlex.quote(f"{endpoint}/inbox/.resp-{sequence}.json.tmp")
    final = shlex.quote(f"{endpoint}/inbox/resp-{sequence}.json")
    return (
        f"printf '%s' {shlex.quote(text)} > {temporary} && "
        f"mv {temporary} {final} && echo '@@ wrote {sequence}'"
    )


def next_move(conversation: Conversation, settings: DriverSettings | None = None) -> Move:
    """The agent's next move, derived from the conversation alone."""
    settings = settings or DriverSettings()
    endpoint = endpoint_of(conversation.prompt)
    if endpoint is None:
        return FinalText(NO_ENDPOINT_TEXT)
    if len(conversation.tool_results) >= settings.max_tool_results:
        return FinalText(TOO_LONG_TEXT)
    observations: dict[int, dict[str, Any]] = {}
    written: set[int] = set()
    idle_waits = 0
    for text in conversation.tool_results:
        seen = read_result(text)
        if seen.kind == "closed":
            return FinalText(FINAL_TEXT)
        if seen.kind == "waiting":
            idle_waits += 1
            continue
        idle_waits = 0
        if seen.kind == "obs" and seen.sequence is not None and seen.document is not None:
            observations[seen.sequence] = seen.document
        elif seen.kind == "wrote" and seen.sequence is not None:
            written.add(seen.sequence)
    if idle_waits >= settings.max_waits:
        return FinalText(GAVE_UP_TEXT)
    latest = max(observations, default=0)
    if latest and latest not in written:
        document = response_document(observations[latest], latest, settings)
        return ShellCommand(respond_command(endpoint, latest, document), "respond")
    return ShellCommand(wait_command(endpoint, latest + 1, settings), "wait")
