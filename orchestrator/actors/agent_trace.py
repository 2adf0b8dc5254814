"""An agent CLI's own account of its work, read from its captured standard output (the
viewer shows it, the ATIF export carries it).

A method profile may declare `"actor": {"trace": FORMAT}`: its actor is an agent CLI
whose standard output (`actor-stdout.log`) is a machine-readable account of what it did,
one JSON object a line. This module knows no format: each is parsed by its agent's folder
(`agents/<name>/trace.py`), registered by its name in pyproject.toml's
`[project.entry-points."mailroom.agent_traces"]` (`trace_parsers`). A parser turns one
event at a time into `Step`s with the vocabulary here; a format nobody registered is said,
not read.

Everything in it is untrusted: the agent wrote it, and a hostile actor may write anything
on its standard output. It is read as data and never acted on; reading never raises on
bad content. What is read is bounded: at most `MAX_TRACE_BYTES` of the file, lines of at
most `MAX_LINE_BYTES`, at most `MAX_LINES` lines and `MAX_STEPS` steps, and each shown
text at most `MAX_ITEM_CHARS` characters (`Clipped` says how many more there were).
Images are never shown, only "[image]". What is left out is said (`Trace.problems`).

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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, Protocol

from mailroom.orchestrator.actors.profiles import TRACE_PARSERS_GROUP
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
    `marks` and `closes`: the mailbox names its command or input names (see `assign`);
    `answers`: the policy calls whose response file (`resp-<n>.json`) it names. All
    three are read from the whole command, before it is clipped (`mark`).
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
    answers: tuple[int, ...] = ()

    def mark(self, text: str) -> None:
        """Mark the step by the mailbox names in the whole of `text`: the policy calls
        they name (a number 0 names none), those whose response file they name, and
        whether they name `closed.json` (see `assign`)."""
        named: set[int] = set()
        answered: set[int] = set()
        closes = False
        for match in _MAILBOX_NAME.finditer(text):
            if match.group(3):
                closes = True
                continue
            number = int(match.group(1) or match.group(2))
            if number > 0:
                named.add(number)
                if match.group(2):
                    answered.add(number)
        self.marks, self.closes, self.answers = (
            tuple(sorted(named)),
            closes,
            tuple(sorted(answered)),
        )


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
    manifest is read as it is: a value this evaluator cannot read is returned for the page
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


def integer(value: Any) -> int | None:
    """`value` if it is an int (a bool is not), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def short_name(value: Any) -> str | None:
    """`value` if it is a string, cut to `MAX_NAME_CHARS` (a tool's name, a status)."""
    return Clipped.of(value, MAX_NAME_CHARS).text if isinstance(value, str) else None


def as_text(value: Any) -> str:
    """An input or a structured result as text: a string as it is, anything else as
    JSON, indented only when it is short (indentation grows with the depth of nesting:
    a deeply nested line of an actor's would grow a hundredfold)."""
    if isinstance(value, str):
        return value
    try:
        compact = json.dumps(value, ensure_ascii=False)
        if len(compact) > MAX_ITEM_CHARS:
            return compact
        return json.dumps(value, indent=1, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        return "[not shown: cannot be written as text]"


def result_text(content: Any) -> str:
    """A tool result's content: a string, or blocks of text and images (never shown)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return as_text(content)
    parts: list[str] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "image":
            parts.append("[image]")
        else:
            parts.append(f"[{short_name(kind) or 'content'}]")
    return "\n".join(parts)


def tool_call(line: int, tool: str | None, call_text: str) -> Step:
    """A tool call's step, marked by the mailbox names in the whole of `call_text`."""
    step = Step("tool", line, tool=tool, call=Clipped.of(call_text))
    step.mark(call_text)
    return step


class TraceReader:
    """Collects steps and what was left out, both bounded: `add` refuses a step past
    `MAX_STEPS` (and returns None)."""

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

    def add_call(
        self, line: int, tool: str | None, arguments: Any, call_id: Any, ids: dict[str, Step]
    ) -> Step | None:
        """A tool call's step: its arguments' `command` shown when it is a string, else
        the arguments as text; kept in `ids` by `call_id` for the result that answers it."""
        command = arguments.get("command") if isinstance(arguments, dict) else None
        step = self.add(
            tool_call(line, tool, command if isinstance(command, str) else as_text(arguments))
        )
        if step is not None and isinstance(call_id, str) and len(ids) < MAX_STEPS:
            ids[call_id] = step
        return step

    def answered_call(self, line: int, call_id: Any, ids: dict[str, Step]) -> Step | None:
        """The call a result answers, by its id; for a call not in the trace (or one
        answered already) a step standing for it."""
        answered = ids.get(call_id) if isinstance(call_id, str) else None
        if answered is None or answered.output is not None:
            answered = self.add(Step("tool", line, tool="(a call not in the trace)"))
        return answered

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


class TraceParser(Protocol):
    """Reads one event of its format: `record` is the JSON object on trace line `line`.
    Its steps go to `reader`; `ids` (one per trace) lets a later event find the step an
    earlier one made. Returns whether `record` is an event of the format."""

    def __call__(
        self, record: dict[str, Any], line: int, reader: TraceReader, ids: dict[str, Step], /
    ) -> bool: ...


@cache
def trace_parsers() -> Mapping[str, TraceParser]:
    """The registered formats' parsers, by name. An entry point that cannot be loaded or
    names no callable is left out: its format is then one this evaluator does not read."""
    found: dict[str, TraceParser] = {}
    for point in sorted(entry_points(group=TRACE_PARSERS_GROUP), key=lambda p: p.name):
        if point.name in found:
            continue  # one distribution seen twice on the path (an editable install)
        try:
            parser = point.load()
        except Exception:
            continue
        if callable(parser):
            found[point.name] = parser
    return MappingProxyType(found)


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
    parsers = trace_parsers()
    if fmt not in parsers:
        readable = ", ".join(sorted(parsers))
        return Trace(
            fmt, problems=[f"the format {fmt!r} is not one this evaluator reads ({readable})"]
        )
    parser = parsers[fmt]
    reader = TraceReader(fmt)
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
        except Exception as exc:  # an agent's parser is a plug-in: its fault is said
            reader.leave_out(f"the {fmt} parser failed on it ({type(exc).__name__})", number)
            continue
        if known:
            reader.trace.events += 1
        else:
            reader.leave_out(f"not an event of {fmt} this evaluator reads", number)
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
