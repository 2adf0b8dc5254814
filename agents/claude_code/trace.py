"""Claude Code's account of its work, the trace format `claude_stream_json`
(`claude -p --output-format stream-json --verbose`): one JSON object a line; `assistant`
messages hold `text`, `thinking` and `tool_use` blocks, `user` messages hold the
`tool_result` blocks answering them (by `tool_use_id`), and a final `result` message
closes the session. Registered in pyproject.toml's `mailroom.agent_traces` entry points;
the rules for reading it (untrusted, bounded) are `mailroom.orchestrator.actors.agent_trace`'s.
"""

from __future__ import annotations

from typing import Any

from mailroom.orchestrator.actors.agent_trace import (
    Clipped,
    Step,
    TraceParser,
    TraceReader,
    result_text,
    short_name,
)


def _assistant(content: Any, line: int, reader: TraceReader, calls: dict[str, Step]) -> None:
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
            name = short_name(block.get("name"))
            reader.add_call(line, name, block.get("input"), block.get("id"), calls)


def _user(content: Any, line: int, reader: TraceReader, calls: dict[str, Step]) -> None:
    if isinstance(content, str):
        reader.add(Step("input", line, text=Clipped.of(content)))
        return
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        part = block.get("type")
        if part == "tool_result":
            answered = reader.answered_call(line, block.get("tool_use_id"), calls)
            if answered is not None:
                answered.output = Clipped.of(result_text(block.get("content")))
                error = block.get("is_error")
                answered.is_error = error if isinstance(error, bool) else None
        elif part == "text" and isinstance(block.get("text"), str):
            reader.add(Step("input", line, text=Clipped.of(block["text"])))
        elif part == "image":
            reader.add(Step("input", line, text=Clipped.of("[image]")))


def read_event(
    record: dict[str, Any], line: int, reader: TraceReader, calls: dict[str, Step]
) -> bool:
    """One line of the stream; `calls` finds a tool call by its `tool_use` id."""
    kind = record.get("type")
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if kind == "system":
        subtype = short_name(record.get("subtype"))
        model = short_name(record.get("model"))
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
        _assistant(content, line, reader, calls)
        return True
    if kind == "user":
        _user(content, line, reader, calls)
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
                status=short_name(record.get("subtype")),
            )
        )
        return True
    return kind == "stream_event"  # partial messages: the whole ones say it all


PARSER: TraceParser = read_event
