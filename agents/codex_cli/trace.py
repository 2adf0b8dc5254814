"""Codex CLI's account of its work, the trace format `codex_json` (`codex exec --json`,
codex-rs/exec/src/exec_events.rs): one event a line; `item.started`, `item.updated` and
`item.completed` carry one item each (`agent_message`, `reasoning`, `command_execution`
with its `aggregated_output` and `exit_code`, `file_change`, `mcp_tool_call`,
`web_search`, `todo_list`, `error`, ...), the later events of an item replacing what the
earlier ones said; `turn.failed` and `error` report failures. Registered in
pyproject.toml's `mailroom.agent_traces` entry points; the rules for reading it
(untrusted, bounded) are `mailroom.orchestrator.actors.agent_trace`'s.
"""

from __future__ import annotations

from typing import Any

from mailroom.orchestrator.actors.agent_trace import (
    MAX_STEPS,
    Clipped,
    Step,
    StepKind,
    TraceParser,
    TraceReader,
    as_text,
    integer,
    result_text,
    short_name,
)

_STEP_KINDS: dict[str, StepKind] = {
    "agent_message": "text",
    "plan": "text",
    "reasoning": "thinking",
    "todo_list": "note",
    "error": "error",
}


def _fill(step: Step, item: dict[str, Any]) -> None:
    """Fill `step` from the latest state of its item."""
    kind = item.get("type")
    status = short_name(item.get("status"))
    step.status = status
    if kind in ("agent_message", "reasoning", "plan"):
        text = item.get("text")
        step.text = Clipped.of(text if isinstance(text, str) else "")
    elif kind == "command_execution":
        command = item.get("command")
        step.tool = "command"
        step.call = Clipped.of(command if isinstance(command, str) else as_text(command))
        step.mark(command if isinstance(command, str) else "")
        output = item.get("aggregated_output")
        if isinstance(output, str) and (output or status != "in_progress"):
            step.output = Clipped.of(output)
        step.exit_code = integer(item.get("exit_code"))
        step.is_error = None if status in (None, "in_progress") else status != "completed"
    elif kind == "file_change":
        changes = item.get("changes")
        listed = [
            f"{short_name(c.get('kind')) or '?'} {c.get('path')}"
            for c in (changes if isinstance(changes, list) else [])
            if isinstance(c, dict) and isinstance(c.get("path"), str)
        ]
        text = "\n".join(listed)
        step.tool = "file_change"
        step.call = Clipped.of(text)
        step.mark(text)
        step.is_error = status == "failed" if status else None
    elif kind == "mcp_tool_call":
        text = as_text(item.get("arguments"))
        step.tool = f"{short_name(item.get('server')) or '?'}.{short_name(item.get('tool')) or '?'}"
        step.call = Clipped.of(text)
        step.mark(text)
        result, error = item.get("result"), item.get("error")
        if isinstance(error, dict):
            step.output = Clipped.of(as_text(error.get("message")))
            step.is_error = True
        elif isinstance(result, dict):
            step.output = Clipped.of(result_text(result.get("content")))
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
        text = as_text(item)
        step.tool = short_name(kind) or "(unknown item)"
        step.call = Clipped.of(text)
        step.mark(text)


def read_event(
    record: dict[str, Any], line: int, reader: TraceReader, items: dict[str, Step]
) -> bool:
    """One event; `items` finds the step of an item by its id, for its later events."""
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
                _STEP_KINDS.get(item_kind, "tool") if isinstance(item_kind, str) else "tool", line
            )
            step = reader.add(made)
            if step is None:
                return True
            if isinstance(item_id, str) and len(items) < MAX_STEPS:
                items[item_id] = step
        _fill(step, item)
        return True
    if kind in ("turn.failed", "error"):
        error = record.get("error") if kind == "turn.failed" else record
        message = error.get("message") if isinstance(error, dict) else None
        said = f"{kind}: {message if isinstance(message, str) else ''}"
        reader.add(Step("error", line, text=Clipped.of(said)))
        return True
    return kind in ("thread.started", "turn.started", "turn.completed", "item.plan.delta")


PARSER: TraceParser = read_event
