"""An agent CLI's own account of its work, read from its captured standard output.

A method profile may declare `"actor": {"trace": FORMAT}`: its actor is an agent CLI
whose standard output (`actor-stdout.log`) is a machine-readable account of what it did.
Two formats are read:

- `claude_stream_json` (`claude -p --output-format stream-json --verbose`): one JSON
  object a line; `assistant` messages hold `text`, `thinking` and `tool_use` blocks,
  `user` messages hold the `tool_result` blocks answering them (by `tool_use_id`), and a
  final `result` message closes the session.
- `codex_json` (`codex exec --json`): one event a line; `item.started`, `item.updated`
  and `item.completed` carry one item each (`agent_message`, `reasoning`,
  `command_execution` with its `aggregated_output` and `exit_code`, `file_change`,
  `mcp_tool_call`, `web_search`, `todo_list`, `error`, ...), the later events of an
  item replacing what the earlier ones said; `turn.failed` and `error` report failures.

Everything in it is untrusted: the agent wrote it, and a hostile actor may write anything
on its standard output. It is read as data and never acted on; reading never raises on
bad content. What is read is bounded: at most `MAX_TRACE_BYTES` of the file, lines of at
most `MAX_LINE_BYTES`, at most `MAX_LINES` lines and `MAX_STEPS` steps, and each shown
text at most
`MAX_ITEM_CHARS` characters (`Clipped` says how many more there were). Images are never
shown, only "[image]". What is left out is said (`Trace.problems`).

Placing steps beside policy calls (`assign`) is a reading aid, not evidence: the trace is
the agent's own claim, and the rule only looks at the mailbox file names a step's
command or input names. The rule:

1. A tool call whose command or input names `obs-<n>.json`, an image of it
   (`obs-<n>-<camera>.png`) or `resp-<n>.json` marks policy call n (the largest n it
   names, in the whole command, not only the part shown); one naming `closed.json` and
   no policy call marks the end of the episode (agents wait for "obs-<n>.json or
   closed.json" in one command: that is about observation n). What a result says (a
   listing of the outbox) marks nothing.
2. Steps are taken in the trace's order and belong to the current group, which starts as
   "before the first observation". A marking tool call makes its policy call the current
   group, if that comes later than the current one: the group only moves forward, so a
   look back at an earlier observation stays where it happened.
3. The agent's words (text and thinking) that directly lead up to a tool call, with no
   other step in between, go with that call: what it says before reading `obs-3.json` is
   about observation 3.
4. A mark of `closed.json` alone, or of a policy call after the last one the page shows, starts
   the "after the episode" group; a mark of a policy call the page does not show (its
   events were not kept) goes to the latest shown one before it. Steps after the last
   mark stay in the last group. With no policy call shown, every step is "before the
   first observation".
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mailroom.orchestrator.records.layout import AttemptPaths

MAX_TRACE_BYTES = 64 << 20  # read of the captured output
MAX_LINE_BYTES = 16 << 20  # one event (a tool result may hold an image as base64)
MAX_LINES = 100_000
MAX_STEPS = 2000
MAX_ITEM_CHARS = 4000  # shown of each text, command, input and result
MAX_NAME_CHARS = 200  # of a tool's name or a status

StepKind = Literal["text", "thinking", "tool", "input", "result", "error", "note"]
NARRATION: frozenset[StepKind] = frozenset({"text", "thinking"})

# The mailbox names the protocol fixes (DESIGN.md: obs-<n>.json, obs-<n>-<camera>.png,
# resp-<n>.json, closed.json), wherever they appear in a command or an input.
_MAILBOX_NAME = re.compile(
    r"(?<![A-Za-z0-9_-])(?:obs-(\d{1,9})(?:-[A-Za-z0-9_]+)?\.(?:json|png)|resp-(\d{1,9})\.json"
    r"|(closed)\.json)"
)
# What the orchestrator writes where it stopped keeping the actor's output.
_CUT_MARKER = re.compile(rb"^\[mailroom: truncated here; (\d{1,20}) more bytes\]$")


@dataclass(frozen=True)
class Clipped:
    """A text as shown: at most `MAX_ITEM_CHARS` characters, and how many were left out.
    Lone surrogates (JSON may encode them) are replaced so the page can be UTF-8."""

    text: str
    omitted: int = 0

    @classmethod
    def of(cls, text: str, limit: int = MAX_ITEM_CHARS) -> Clipped:
        kept = text[:limit].encode("utf-8", errors="replace").decode("utf-8")
        return cls(kept, max(0, len(text) - limit))

    @property
    def cut(self) -> bool:
        return self.omitted > 0


@dataclass
class Step:
    """One thing the agent says it did, in the trace's order.

    `text`: its words (kinds text, thinking), what it was handed (input), the final
    result, an error or a note. `tool`, `call`, `output`, `exit_code`, `is_error` and
    `status`: a tool call (kind tool) and its result, when the trace gives them.
    `marks` and `closes`: the mailbox names its command or input names (see `assign`).
    """

    kind: StepKind
    line: int  # the trace line it first appeared on
    text: Clipped | None = None
    tool: str | None = None
    call: Clipped | None = None
    output: Clipped | None = None
    exit_code: int | None = None
    is_error: bool | None = None
    status: str | None = None
    marks: tuple[int, ...] = ()
    closes: bool = False


@dataclass
class Trace:
    """An attempt's account: `events` lines were read as the format's events."""

    format: str
    steps: list[Step] = field(default_factory=list)
    events: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def readable(self) -> bool:
        return self.events > 0


@dataclass
class Assignment:
    """The steps placed by `assign`'s rule (a reading aid, not evidence)."""

    before: list[Step] = field(default_factory=list)
    decisions: dict[int, list[Step]] = field(default_factory=dict)
    after: list[Step] = field(default_factory=list)


def declared_trace(manifest: Mapping[str, Any]) -> str | None:
    """The trace format the run's recorded profile declares (None: none, or the run's
    actors were started by someone else, so no output of theirs was captured). The
    manifest is read as it is: a value this viewer cannot read is returned for the page
    to say so."""
    transport = manifest.get("transport")
    if isinstance(transport, dict) and transport.get("actor") == "external":
        return None
    profile = manifest.get("profile")
    declaration = profile.get("declaration") if isinstance(profile, dict) else None
    actor = declaration.get("actor") if isinstance(declaration, dict) else None
    trace = actor.get("trace") if isinstance(actor, dict) else None
    if trace is None:
        return None
    return Clipped.of(str(trace), MAX_NAME_CHARS).text


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _name(value: Any) -> str | None:
    return Clipped.of(value, MAX_NAME_CHARS).text if isinstance(value, str) else None


def _marks(text: str) -> tuple[tuple[int, ...], bool]:
    numbers: set[int] = set()
    closes = False
    for match in _MAILBOX_NAME.finditer(text):
        if match.group(3):
            closes = True
        else:
            number = int(match.group(1) or match.group(2))
            if number > 0:
                numbers.add(number)
    return tuple(sorted(numbers)), closes


def _as_text(value: Any) -> str:
    """An input or a structured result as text: a string as it is, anything else as
    indented JSON."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, indent=1, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        return "[not shown: cannot be written as text]"


def _tool_call(line: int, tool: str | None, call_text: str) -> Step:
    marks, closes = _marks(call_text)
    return Step(
        "tool",
        line,
        tool=tool,
        call=Clipped.of(call_text),
        marks=marks,
        closes=closes,
    )


class _Reader:
    """Collects steps and what was left out, both bounded."""

    def __init__(self, fmt: str) -> None:
        self.trace = Trace(fmt)
        self.full = False
        self.left_out: dict[str, tuple[int, list[int]]] = {}  # why -> (count, first lines)

    def add(self, step: Step) -> Step | None:
        if len(self.trace.steps) >= MAX_STEPS:
            self.full = True
            return None
        self.trace.steps.append(step)
        return step

    def leave_out(self, why: str, line: int) -> None:
        count, lines = self.left_out.get(why, (0, []))
        if len(lines) < 5:
            lines.append(line)
        self.left_out[why] = (count + 1, lines)

    def finish(self) -> Trace:
        for why, (count, lines) in self.left_out.items():
            first = ", ".join(str(n) for n in lines)
            more = f", ... ({count} in all)" if count > len(lines) else ""
            self.trace.problems.append(f"{why}: line {first}{more}: left out")
        return self.trace


# Claude Code, `--output-format stream-json --verbose`.


def _claude_result_text(content: Any) -> str:
    """A tool result's content: a string, or blocks of text and images (never shown)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return _as_text(content)
    parts: list[str] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "image":
            parts.append("[image]")
        else:
            parts.append(f"[{_name(kind) or 'content'}]")
    return "\n".join(parts)


def _claude(record: dict[str, Any], line: int, reader: _Reader, calls: dict[str, Step]) -> bool:
    kind = record.get("type")
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if kind == "system":
        subtype = _name(record.get("subtype"))
        model = _name(record.get("model"))
        if subtype == "init":
            said = "session started" + (f" (model {model}, as the agent says)" if model else "")
        else:
            said = f"system: {subtype or '?'}"
        reader.add(Step("note", line, text=Clipped.of(said)))
        return True
    if kind == "assistant":
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if isinstance(record.get("error"), str):
            reader.add(Step("error", line, text=Clipped.of(f"error: {record['error']}")))
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            part = block.get("type")
            if part == "text" and isinstance(block.get("text"), str):
                reader.add(Step("text", line, text=Clipped.of(block["text"])))
            elif part == "thinking" and isinstance(block.get("thinking"), str):
                reader.add(Step("thinking", line, text=Clipped.of(block["thinking"])))
            elif part == "redacted_thinking":
                reader.add(Step("thinking", line, text=Clipped.of("[redacted thinking]")))
            elif isinstance(part, str) and part.endswith("tool_use"):
                tool_input = block.get("input")
                command = tool_input.get("command") if isinstance(tool_input, dict) else None
                text = command if isinstance(command, str) else _as_text(tool_input)
                step = reader.add(_tool_call(line, _name(block.get("name")), text))
                call_id = block.get("id")
                if step is not None and isinstance(call_id, str) and len(calls) < MAX_STEPS:
                    calls[call_id] = step
        return True
    if kind == "user":
        if isinstance(content, str):
            reader.add(Step("input", line, text=Clipped.of(content)))
            return True
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            part = block.get("type")
            if part == "tool_result":
                call_id = block.get("tool_use_id")
                answered = calls.get(call_id) if isinstance(call_id, str) else None
                if answered is None or answered.output is not None:
                    answered = reader.add(Step("tool", line, tool="(a call not in the trace)"))
                if answered is not None:
                    answered.output = Clipped.of(_claude_result_text(block.get("content")))
                    error = block.get("is_error")
                    answered.is_error = error if isinstance(error, bool) else None
            elif part == "text" and isinstance(block.get("text"), str):
                reader.add(Step("input", line, text=Clipped.of(block["text"])))
            elif part == "image":
                reader.add(Step("input", line, text=Clipped.of("[image]")))
        return True
    if kind == "result":
        result = record.get("result")
        error = record.get("is_error")
        reader.add(
            Step(
                "result",
                line,
                text=Clipped.of(result if isinstance(result, str) else ""),
                is_error=error if isinstance(error, bool) else None,
                status=_name(record.get("subtype")),
            )
        )
        return True
    return kind == "stream_event"  # partial messages: the whole ones say it all


# Codex, `codex exec --json` (codex-rs/exec/src/exec_events.rs).


def _codex_item(item: dict[str, Any], step: Step) -> None:
    """Fill `step` from the latest state of its item."""
    kind = item.get("type")
    status = _name(item.get("status"))
    step.status = status
    if kind in ("agent_message", "reasoning", "plan"):
        text = item.get("text")
        step.text = Clipped.of(text if isinstance(text, str) else "")
    elif kind == "command_execution":
        command = item.get("command")
        step.tool = "command"
        step.call = Clipped.of(command if isinstance(command, str) else _as_text(command))
        step.marks, step.closes = _marks(command if isinstance(command, str) else "")
        output = item.get("aggregated_output")
        if isinstance(output, str) and (output or status != "in_progress"):
            step.output = Clipped.of(output)
        step.exit_code = _int(item.get("exit_code"))
        step.is_error = None if status in (None, "in_progress") else status != "completed"
    elif kind == "file_change":
        changes = item.get("changes")
        listed = [
            f"{_name(c.get('kind')) or '?'} {c.get('path')}"
            for c in (changes if isinstance(changes, list) else [])
            if isinstance(c, dict) and isinstance(c.get("path"), str)
        ]
        text = "\n".join(listed)
        step.tool = "file_change"
        step.call = Clipped.of(text)
        step.marks, step.closes = _marks(text)
        step.is_error = status == "failed" if status else None
    elif kind == "mcp_tool_call":
        text = _as_text(item.get("arguments"))
        step.tool = f"{_name(item.get('server')) or '?'}.{_name(item.get('tool')) or '?'}"
        step.call = Clipped.of(text)
        step.marks, step.closes = _marks(text)
        result, error = item.get("result"), item.get("error")
        if isinstance(error, dict):
            step.output = Clipped.of(_as_text(error.get("message")))
            step.is_error = True
        elif isinstance(result, dict):
            step.output = Clipped.of(_claude_result_text(result.get("content")))
            step.is_error = False
    elif kind == "web_search":
        query = item.get("query")
        step.tool = "web_search"
        step.call = Clipped.of(query if isinstance(query, str) else "")
    elif kind == "todo_list":
        entries = item.get("items")
        step.text = Clipped.of(
            "\n".join(
                f"[{'x' if e.get('completed') is True else ' '}] {e.get('text')}"
                for e in (entries if isinstance(entries, list) else [])
                if isinstance(e, dict)
            )
        )
    elif kind == "error":
        message = item.get("message")
        step.text = Clipped.of(message if isinstance(message, str) else "")
    else:
        text = _as_text(item)
        step.tool = _name(kind) or "(unknown item)"
        step.call = Clipped.of(text)
        step.marks, step.closes = _marks(text)


_CODEX_KINDS: dict[str, StepKind] = {
    "agent_message": "text",
    "plan": "text",
    "reasoning": "thinking",
    "todo_list": "note",
    "error": "error",
}


def _codex(record: dict[str, Any], line: int, reader: _Reader, items: dict[str, Step]) -> bool:
    kind = record.get("type")
    if kind in ("item.started", "item.updated", "item.completed"):
        item = record.get("item")
        if not isinstance(item, dict):
            return False
        item_id = item.get("id")
        step = items.get(item_id) if isinstance(item_id, str) else None
        if step is None:
            item_kind = item.get("type")
            made = Step(
                _CODEX_KINDS.get(item_kind, "tool") if isinstance(item_kind, str) else "tool", line
            )
            step = reader.add(made)
            if step is None:
                return True
            if isinstance(item_id, str) and len(items) < MAX_STEPS:
                items[item_id] = step
        _codex_item(item, step)
        return True
    if kind in ("turn.failed", "error"):
        error = record.get("error") if kind == "turn.failed" else record
        message = error.get("message") if isinstance(error, dict) else None
        said = f"{kind}: {message if isinstance(message, str) else ''}"
        reader.add(Step("error", line, text=Clipped.of(said)))
        return True
    return kind in ("thread.started", "turn.started", "turn.completed", "item.plan.delta")


_Parser = Callable[[dict[str, Any], int, _Reader, dict[str, Step]], bool]
PARSERS: dict[str, _Parser] = {"claude_stream_json": _claude, "codex_json": _codex}


def _lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    start = 0
    number = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        number += 1
        yield number, data[start:end]
        start = end + 1


def parse_trace(data: bytes, fmt: str, *, complete: bool = True) -> Trace:
    """The steps of a captured output in format `fmt` (an unknown format: none, said).
    `complete=False`: `data` is only the first part of the output."""
    if fmt not in PARSERS:
        readable = ", ".join(sorted(PARSERS))
        return Trace(
            fmt, problems=[f"the format {fmt!r} is not one this viewer reads ({readable})"]
        )
    parser = PARSERS[fmt]
    reader = _Reader(fmt)
    ids: dict[str, Step] = {}
    open_line = None if data.endswith(b"\n") else data.count(b"\n") + 1
    # The orchestrator's cut marker is the output's last line; anywhere else an actor
    # wrote it, and it is the actor's text.
    final_line = data.rstrip(b"\n").count(b"\n") + 1
    stopped = ""
    for number, raw in _lines(data):
        if number > MAX_LINES:
            stopped = f"only the first {MAX_LINES} lines were read"
            break
        line = raw.strip()
        if not line:
            continue
        if len(line) > MAX_LINE_BYTES:
            reader.leave_out(f"longer than {MAX_LINE_BYTES} bytes", number)
            continue
        cut = _CUT_MARKER.match(line) if number == final_line else None
        if cut:
            said = f"the orchestrator kept no more of the output ({int(cut.group(1))} bytes more)"
            reader.add(Step("note", number, text=Clipped.of(said)))
            continue
        record: object = None
        if line.startswith(b"{") and line.endswith(b"}"):  # else not an object: not parsed
            with contextlib.suppress(ValueError, RecursionError):
                record = json.loads(line)
        if not isinstance(record, dict):
            last = number == open_line
            why = "incomplete (still being written?)" if last else "not a JSON object"
            reader.leave_out(why, number)
            continue
        try:
            known = parser(record, number, reader, ids)
        except RecursionError:  # a structure too deep to write out
            known = False
        if known:
            reader.trace.events += 1
        else:
            reader.leave_out(f"not an event of {fmt} this viewer reads", number)
        if reader.full:
            stopped = f"the account goes on after its first {MAX_STEPS} steps (line {number})"
            break
    trace = reader.finish()
    if stopped:
        trace.problems.append(f"{stopped}: the rest is not shown")
    if not complete:
        trace.problems.append(f"only the first {len(data)} bytes were read")
    return trace


def read_trace(directory: Path, fmt: str) -> Trace | None:
    """The account kept in an attempt's folder (None: no captured output kept)."""
    path = AttemptPaths(directory).actor_output["stdout"]
    if not path.is_file():
        return None
    with path.open("rb") as handle:
        data = handle.read(MAX_TRACE_BYTES + 1)
    return parse_trace(data[:MAX_TRACE_BYTES], fmt, complete=len(data) <= MAX_TRACE_BYTES)


# Which policy call a step is about (the module's docstring states the rule).

_Group = int  # 0: before the first observation; a decision's sequence; _AFTER: after it


def assign(steps: Sequence[Step], sequences: Sequence[int]) -> Assignment:
    """Place `steps` before, at or after the policy calls `sequences` (those the page
    shows), by the mailbox names their commands and inputs name."""
    known = sorted({s for s in sequences if s > 0})
    after = (known[-1] + 1) if known else 0

    def target(step: Step) -> _Group | None:
        if not known:
            return None
        if not step.marks:
            # closed.json alone: a command that waits for an observation or the close
            # names both, and is about the observation.
            return after if step.closes else None
        named = step.marks[-1]
        if named > known[-1]:
            return after
        return max((s for s in known if s <= named), default=known[0])

    placed: dict[_Group, list[Step]] = {}
    current: _Group = 0
    pending: list[Step] = []
    for step in steps:
        if step.kind in NARRATION:
            pending.append(step)
            continue
        marked = target(step) if step.kind == "tool" else None
        if marked is not None and marked > current:
            current = marked
        placed.setdefault(current, []).extend([*pending, step])
        pending = []
    placed.setdefault(current, []).extend(pending)
    assignment = Assignment(before=placed.pop(0, []))
    if known:
        assignment.after = placed.pop(after, [])
    assignment.decisions = {s: placed[s] for s in known if placed.get(s)}
    return assignment
