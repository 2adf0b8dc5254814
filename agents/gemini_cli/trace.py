"""Gemini CLI's account of its work, the trace format `gemini_stream_json` (`gemini
--output-format stream-json`): one JSON event a line, each with its `type`: `init`
(`session_id`, `model`), `message` (`role` user or assistant, `content`; an assistant's
answer arrives in pieces marked `delta`, joined here), `tool_use` (`tool_name`,
`tool_id`, `parameters`), `tool_result` (`tool_id`, `status` success or error, `output`
or `error`), `error` (`severity`, `message`) and a final `result` (`status`, `error`,
`stats`). Registered in pyproject.toml's `mailroom.agent_traces` entry points; the
rules for reading it (untrusted, bounded) are `mailroom.orchestrator.actors.agent_trace`'s.
"""

from __future__ import annotations

from typing import Any

from mailroom.orchestrator.actors.agent_trace import (
    Clipped,
    Step,
    TraceParser,
    TraceReader,
    as_text,
    short_name,
)

# Where the answer being pieced together waits among the calls (no tool id has a NUL).
_OPEN_ANSWER = "\0answer"


def _answer_piece(text: str, line: int, reader: TraceReader, calls: dict[str, Step]) -> None:
    """An assistant's piece of text: joined to the answer it continues, else a new step."""
    open_answer = calls.get(_OPEN_ANSWER)
    if open_answer is not None and open_answer.text is not None:
        shown = open_answer.text
        open_answer.text = (
            Clipped(shown.text, shown.omitted + len(text))
            if shown.cut
            else Clipped.of(shown.text + text)
        )
        return
    step = reader.add(Step("text", line, text=Clipped.of(text)))
    if step is not None:
        calls[_OPEN_ANSWER] = step


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        message, kind = error.get("message"), short_name(error.get("type"))
        said = message if isinstance(message, str) else as_text(error)
        return f"{kind}: {said}" if kind else said
    return as_text(error)


def read_event(
    record: dict[str, Any], line: int, reader: TraceReader, calls: dict[str, Step]
) -> bool:
    """One line of the stream; `calls` finds a tool call by its `tool_id`."""
    kind = record.get("type")
    if kind != "message" or record.get("role") != "assistant":
        calls.pop(_OPEN_ANSWER, None)
    if kind == "init":
        model = short_name(record.get("model"))
        said = "session started" + (f" (model {model}, as the agent says)" if model else "")
        reader.add(Step("note", line, text=Clipped.of(said)))
        return True
    if kind == "message":
        content = record.get("content")
        text = content if isinstance(content, str) else as_text(content)
        if record.get("role") == "assistant":
            if record.get("delta") is True:
                _answer_piece(text, line, reader, calls)
            else:
                calls.pop(_OPEN_ANSWER, None)
                reader.add(Step("text", line, text=Clipped.of(text)))
        else:
            reader.add(Step("input", line, text=Clipped.of(text)))
        return True
    if kind == "tool_use":
        name = short_name(record.get("tool_name"))
        reader.add_call(line, name, record.get("parameters"), record.get("tool_id"), calls)
        return True
    if kind == "tool_result":
        answered = reader.answered_call(line, record.get("tool_id"), calls)
        if answered is not None:
            status = short_name(record.get("status"))
            output = record.get("output")
            error = record.get("error")
            said = output if isinstance(output, str) else ""
            if error is not None:
                said = (said + "\n" if said else "") + _error_text(error)
            answered.output = Clipped.of(said)
            answered.status = status
            answered.is_error = None if status is None else status != "success"
        return True
    if kind == "error":
        severity = short_name(record.get("severity")) or "error"
        message = record.get("message")
        said = message if isinstance(message, str) else as_text(message)
        reader.add(Step("error", line, text=Clipped.of(f"{severity}: {said}")))
        return True
    if kind == "result":
        status = short_name(record.get("status"))
        error = record.get("error")
        reader.add(
            Step(
                "result",
                line,
                text=Clipped.of("" if error is None else _error_text(error)),
                is_error=None if status is None else status != "success",
                status=status,
            )
        )
        return True
    return False


PARSER: TraceParser = read_event
