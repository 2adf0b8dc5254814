"""A stand-in for OpenAI's Responses API, its "model" the scripted mailbox driver.

`POST /v1/responses` answers with the server-sent events the real API sends:
`response.created`, `response.in_progress`, then per output item
`response.output_item.added`, its deltas (`response.function_call_arguments.delta` /
`.done` for a function call; `response.content_part.added`,
`response.output_text.delta` / `.done`, `response.content_part.done` for a message)
and `response.output_item.done`, and last `response.completed` with usage. Every
event carries its `sequence_number`. `GET /v1/models` lists the requested models; `HEAD
/` and `GET /` answer 200, anything else 404 in the API's error shape.

Usage varies per generation request (see `http_standin.varied_usage`), `cached_tokens` and
`reasoning_tokens` nonzero on some; it is reported in `response.completed.response.usage`
(and a non-streamed response's `usage`). Reported web searches are `web_search_call`
output items ahead of the answer, each streamed (`response.output_item.added`,
`response.web_search_call.in_progress` / `.searching` / `.completed`,
`response.output_item.done`) and listed in `response.completed`'s output. Faults answer
429 `rate_limit_exceeded` (with `retry-after`) and 503 `server_error`, in the API's error
shape.

The shell tool is read from the request: a function in `tools` (Codex's
`exec_command` with `cmd` and `yield_time_ms`, a `shell_command` taking a string, or a
`shell` taking an argv), or, for models Codex drives in "code mode" (tools declared in an
`additional_tools` input item), the freeform `exec` tool, called with JavaScript that
awaits `tools.exec_command(...)` and hands its output back with `text(...)`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from mailroom.orchestrator.perf.provider_standin.driver import (
    Conversation,
    FinalText,
    Move,
    ShellCommand,
    next_move,
)
from mailroom.orchestrator.perf.provider_standin.http_standin import (
    Admission,
    Answer,
    Reply,
    Request,
    ScriptedStandIn,
    SseEvent,
    Usage,
    approximate_tokens,
    new_id,
    summarize_tools,
    varied_usage,
)

SIDE_REQUEST_TEXT = "OK"
ARGUMENT_CHUNK = 40  # characters of arguments per function_call_arguments.delta
# Codex caps exec_command's wait at 30 s; a longer command leaves a session to poll.
EXEC_YIELD_MS = 30000
SHELL_TIMEOUT_MS = 120000
WEB_SEARCH_QUERY = "stand-in web search"


def _content_texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    texts: list[str] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
    return texts


def conversation_of(body: dict[str, Any]) -> Conversation:
    """The prompt (every user message's text) and the tool outputs, in order."""
    prompts: list[str] = []
    results: list[str] = []
    items = body.get("input")
    if isinstance(items, str):
        return Conversation(items, ())
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") == "user":
            prompts.extend(_content_texts(item.get("content")))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            if isinstance(output, dict):  # an older shape: {"content": ..., "success": ...}
                output = output.get("content")
            results.append("\n".join(_content_texts(output)))
    return Conversation("\n".join(prompts), tuple(results))


def _function_tools(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    tools: dict[str, dict[str, Any]] = {}
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and tool.get("type") == "function" and tool.get("name"):
            tools[str(tool["name"])] = tool
    return tools


def shell_call(body: dict[str, Any], move: ShellCommand) -> tuple[str, dict[str, Any]] | None:
    """The declared shell tool's name and the arguments that run `move`, or None."""
    tools = _function_tools(body)
    if "exec_command" in tools:
        properties = (tools["exec_command"].get("parameters") or {}).get("properties") or {}
        arguments: dict[str, Any] = {"cmd": move.command}
        if "yield_time_ms" in properties:
            arguments["yield_time_ms"] = EXEC_YIELD_MS
        return "exec_command", arguments
    if "shell_command" in tools:
        return "shell_command", {"command": move.command, "timeout_ms": SHELL_TIMEOUT_MS}
    if "shell" in tools:
        argv = ["bash", "-lc", move.command]
        return "shell", {"command": argv, "timeout_ms": SHELL_TIMEOUT_MS}
    return None


def _declared_tools(tools: Any) -> list[dict[str, Any]]:
    """Every tool of a declaration list, namespaces opened."""
    found: list[dict[str, Any]] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            found.extend(_declared_tools(tool.get("tools")))
        else:
            found.append(tool)
    return found


def code_mode_exec(body: dict[str, Any]) -> bool:
    """Whether the request offers code mode's freeform `exec` tool (in `tools` or in an
    `additional_tools` input item) and, through it, `tools.exec_command`."""
    declared = _declared_tools(body.get("tools"))
    items = body.get("input")
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            declared.extend(_declared_tools(item.get("tools")))
    return any(
        tool.get("type") == "custom"
        and tool.get("name") == "exec"
        and "exec_command" in str(tool.get("description", ""))
        for tool in declared
    )


def code_mode_source(move: ShellCommand) -> str:
    """JavaScript for code mode's `exec`: run the command, return its output."""
    arguments = json.dumps({"cmd": move.command, "yield_time_ms": EXEC_YIELD_MS})
    return (
        f'// @exec: {{"yield_time_ms": {EXEC_YIELD_MS + 5000}}}\n'
        f"const result = await tools.exec_command({arguments});\n"
        "text(result.output);\n"
    )


def has_shell_tool(body: dict[str, Any]) -> bool:
    functions = {"exec_command", "shell_command", "shell"} & set(_function_tools(body))
    return bool(functions) or code_mode_exec(body)


class OpenAIStandIn(ScriptedStandIn):
    name = "openai"
    generation_route = "/v1/responses"

    def handle(self, request: Request) -> tuple[Reply, str]:
        if (probe := self.root(request)) is not None:
            return probe
        route = request.route.rstrip("/")
        if request.method == "GET" and route == "/v1/models":
            return Reply(200, {"object": "list", "data": []}), "models"
        if request.method == "POST" and route == self.generation_route:
            return self.generate(request)
        return _error(404, "not_found", f"{request.method} {request.route} is not served")

    def answer(self, request: Request, body: dict[str, Any], admission: Admission) -> Answer:
        requested = str(body.get("model", "stand-in"))
        model = admission.answer_model or requested
        move: Move = (
            next_move(conversation_of(body), self.settings)
            if has_shell_tool(body)
            else FinalText(SIDE_REQUEST_TEXT)
        )
        call = shell_call(body, move) if isinstance(move, ShellCommand) else None
        counter = next(self._ids)
        response_id = new_id("resp_standin_", counter)
        item: dict[str, Any]
        if call is None and isinstance(move, ShellCommand) and code_mode_exec(body):
            item = {
                "id": new_id("ctc_standin_", counter),
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": new_id("call_standin_", counter),
                "name": "exec",
                "input": code_mode_source(move),
            }
            summary = f"exec (code mode) {move.purpose}"
        elif call is not None and isinstance(move, ShellCommand):
            name, arguments = call
            item = {
                "id": new_id("fc_standin_", counter),
                "type": "function_call",
                "status": "completed",
                "arguments": json.dumps(arguments),
                "call_id": new_id("call_standin_", counter),
                "name": name,
            }
            summary = f"{name} {move.purpose}"
        else:
            text = move.text if isinstance(move, FinalText) else ""
            item = {
                "id": new_id("msg_standin_", counter),
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
            summary = "text" if has_shell_tool(body) else "side request (no shell tool)"
        tools = summarize_tools(body.get("tools")) + (
            ["exec(code mode)"] if code_mode_exec(body) else []
        )
        summary += (
            f" model={requested} stream={bool(body.get('stream'))}"
            f" items={len(body.get('input') or [])} tools={','.join(tools)}"
        )
        if model != requested:
            summary += f" answered-as={model}"
        searches = [
            web_search_item(new_id(f"ws_standin_{index}_", counter))
            for index in range(admission.web_search_requests)
        ]
        usage = varied_usage(
            self.usage_number(admission),
            approximate_tokens(request.body),
            max(1, len(json.dumps(item)) // 4),
            admission.web_search_requests,
        )
        final = _response_object(
            response_id, model, body, "completed", [*searches, item], usage_fields(usage)
        )
        if not body.get("stream"):
            return Answer(Reply(200, final), summary, model, 0)
        events = response_events(final)
        return Answer(Reply(200, events=events), summary, model, len(events) - 1)

    def invalid(self, message: str) -> Reply:
        return _error(400, "invalid_request_error", message)[0]

    def rate_limited(self, retry_after_s: int) -> Reply:
        document = {
            "error": {
                "message": f"Rate limit reached. Please try again in {retry_after_s}s.",
                "type": "rate_limit_exceeded",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        }
        return Reply(429, document, headers={"retry-after": str(retry_after_s)})

    def overloaded(self, retry_after_s: int | None) -> Reply:
        document = {
            "error": {
                "message": "The server is overloaded. Please try again later.",
                "type": "server_error",
                "param": None,
                "code": "server_is_overloaded",
            }
        }
        headers = {} if retry_after_s is None else {"retry-after": str(retry_after_s)}
        return Reply(503, document, headers=headers)

    def stream_usage(self, events: Sequence[SseEvent]) -> Usage | None:
        for event in reversed(events):
            if event.name == "response.completed":
                return self.document_usage(event.data["response"])
        return None

    def document_usage(self, document: Any) -> Usage | None:
        if not isinstance(document, dict) or not isinstance(document.get("usage"), dict):
            return None
        return usage_of(document["usage"], document.get("output") or [])


def usage_fields(usage: Usage) -> dict[str, Any]:
    """`usage` in the API's fields (web searches are output items, not usage)."""
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


def usage_of(fields: dict[str, Any], output: list[Any]) -> Usage:
    """The figures of an API `usage` object and a response's `output` items."""
    return Usage(
        input_tokens=int(fields.get("input_tokens") or 0),
        output_tokens=int(fields.get("output_tokens") or 0),
        cache_read_tokens=int((fields.get("input_tokens_details") or {}).get("cached_tokens") or 0),
        reasoning_tokens=int(
            (fields.get("output_tokens_details") or {}).get("reasoning_tokens") or 0
        ),
        server_tool_uses=sum(
            1 for item in output if isinstance(item, dict) and item.get("type") == "web_search_call"
        ),
    )


def web_search_item(item_id: str) -> dict[str, Any]:
    """A completed server-side web search, as a `web_search_call` output item."""
    return {
        "id": item_id,
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": WEB_SEARCH_QUERY},
    }


def _response_object(
    response_id: str,
    model: str,
    body: dict[str, Any],
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": model,
        "output": output,
        "parallel_tool_calls": bool(body.get("parallel_tool_calls", False)),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "store": bool(body.get("store", False)),
        "temperature": 1.0,
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": {},
    }


def _error(status: int, code: str, message: str) -> tuple[Reply, str]:
    document = {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}
    }
    return Reply(status, document), f"error {status} {code}"


def response_events(final: dict[str, Any]) -> list[SseEvent]:
    """The event stream of one response: each of its output items in turn (web searches
    first, then the answer), and last `response.completed` with usage."""
    events: list[SseEvent] = []

    def emit(name: str, **fields: Any) -> None:
        events.append(SseEvent(name, {"type": name, "sequence_number": len(events), **fields}))

    pending = {**final, "status": "in_progress", "output": [], "usage": None}
    emit("response.created", response=pending)
    emit("response.in_progress", response=pending)
    for index, item in enumerate(final["output"]):
        _item_events(emit, index, item)
    emit("response.completed", response=final)
    return events


def _item_events(emit: Callable[..., None], index: int, item: dict[str, Any]) -> None:
    item_id = item["id"]
    if item["type"] == "web_search_call":
        emit(
            "response.output_item.added", output_index=index, item={**item, "status": "in_progress"}
        )
        for phase in ("in_progress", "searching", "completed"):
            emit(f"response.web_search_call.{phase}", item_id=item_id, output_index=index)
    elif item["type"] in ("function_call", "custom_tool_call"):
        field, delta_event = (
            ("arguments", "response.function_call_arguments")
            if item["type"] == "function_call"
            else ("input", "response.custom_tool_call_input")
        )
        emit(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", field: ""},
        )
        value = item[field]
        for start in range(0, len(value), ARGUMENT_CHUNK):
            emit(
                f"{delta_event}.delta",
                item_id=item_id,
                output_index=index,
                delta=value[start : start + ARGUMENT_CHUNK],
            )
        emit(f"{delta_event}.done", item_id=item_id, output_index=index, **{field: value})
    else:
        text = item["content"][0]["text"]
        emit(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "content": []},
        )
        part = {"type": "output_text", "text": "", "annotations": []}
        emit(
            "response.content_part.added",
            item_id=item_id,
            output_index=index,
            content_index=0,
            part=part,
        )
        emit(
            "response.output_text.delta",
            item_id=item_id,
            output_index=index,
            content_index=0,
            delta=text,
        )
        emit(
            "response.output_text.done",
            item_id=item_id,
            output_index=index,
            content_index=0,
            text=text,
        )
        emit(
            "response.content_part.done",
            item_id=item_id,
            output_index=index,
            content_index=0,
            part={**part, "text": text},
        )
    emit("response.output_item.done", output_index=index, item=item)
