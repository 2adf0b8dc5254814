"""A stand-in for Anthropic's Messages API, its "model" the scripted mailbox driver.

`POST /v1/messages` answers with the server-sent events the real API sends
(`message_start`, `ping`, `content_block_start` / `content_block_delta` /
`content_block_stop` for text and for `tool_use` with `input_json_delta`,
`message_delta` with the stop reason and usage, `message_stop`), or with one JSON
message when the request does not stream. `POST /v1/messages/count_tokens` answers an
estimate, `HEAD /` and `GET /` answer 200, anything else 404 in the API's error shape.
"""

from __future__ import annotations

import json
from typing import Any

from .driver import Conversation, FinalText, Move, ShellCommand, next_move
from .http_standin import (
    Reply,
    Request,
    ScriptedStandIn,
    SseEvent,
    approximate_tokens,
    new_id,
    summarize_tools,
)

SIDE_REQUEST_TEXT = "OK"
JSON_CHUNK = 40  # characters of tool input per input_json_delta, as the API splits them


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    texts: list[str] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                texts.append(str(block.get("text", "")))
    return texts


def conversation_of(body: dict[str, Any]) -> Conversation:
    """The prompt (every user text) and the tool results, in order, of a request."""
    prompts: list[str] = []
    results: list[str] = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            prompts.append(content)
            continue
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                prompts.append(str(block.get("text", "")))
            elif block.get("type") == "tool_result":
                results.append("\n".join(_texts(block.get("content"))))
    return Conversation("\n".join(prompts), tuple(results))


def shell_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    """The request's shell tool: `Bash`, else any tool taking a `command` string."""
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    for tool in sorted(tools, key=lambda t: t.get("name") != "Bash"):
        properties = (tool.get("input_schema") or {}).get("properties") or {}
        if "command" in properties:
            return tool
    return None


def tool_input(tool: dict[str, Any], move: ShellCommand) -> dict[str, Any]:
    properties = (tool.get("input_schema") or {}).get("properties") or {}
    arguments: dict[str, Any] = {"command": move.command}
    if "description" in properties:
        arguments["description"] = (
            "Wait for the next observation" if move.purpose == "wait" else "Write the response"
        )
    if "timeout" in properties:
        arguments["timeout"] = 120000
    return arguments


class AnthropicStandIn(ScriptedStandIn):
    name = "anthropic"

    def handle(self, request: Request) -> tuple[Reply, str]:
        if (probe := self.root(request)) is not None:
            return probe
        route = request.route.rstrip("/")
        if request.method == "POST" and route == "/v1/messages/count_tokens":
            tokens = approximate_tokens(request.body)
            return Reply(200, {"input_tokens": tokens}), f"count_tokens {tokens}"
        if request.method == "POST" and route == "/v1/messages":
            body = request.json()
            if not isinstance(body, dict):
                return _error(400, "invalid_request_error", "the body is not a JSON object")
            return self._messages(request, body)
        return _error(404, "not_found_error", f"{request.method} {request.route} is not served")

    def _messages(self, request: Request, body: dict[str, Any]) -> tuple[Reply, str]:
        model = str(body.get("model", "stand-in"))
        tool = shell_tool(body)
        move: Move
        if tool is None:
            move = FinalText(SIDE_REQUEST_TEXT)
        else:
            move = next_move(conversation_of(body), self.settings)
        message_id = new_id("msg_standin_", next(self._ids))
        input_tokens = approximate_tokens(request.body)
        blocks: list[dict[str, Any]]
        if isinstance(move, ShellCommand) and tool is not None:
            tool_id = new_id("toolu_standin_", next(self._ids))
            arguments = tool_input(tool, move)
            blocks = [{"type": "tool_use", "id": tool_id, "name": tool["name"], "input": arguments}]
            stop_reason = "tool_use"
            summary = f"{tool['name']} {move.purpose}"
        else:
            text = move.text if isinstance(move, FinalText) else ""
            blocks = [{"type": "text", "text": text}]
            stop_reason = "end_turn"
            summary = "text" if tool is not None else "side request (no shell tool)"
        summary += (
            f" model={model} stream={bool(body.get('stream'))}"
            f" messages={len(body.get('messages') or [])}"
            f" tools={len(summarize_tools(body.get('tools')))}"
        )
        output_tokens = max(1, len(json.dumps(blocks)) // 4)
        if not body.get("stream"):
            document = {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": blocks,
                "stop_reason": stop_reason,
                "stop_sequence": None,
                "usage": _usage(input_tokens, output_tokens),
            }
            return Reply(200, document), summary
        return Reply(
            200,
            events=message_events(
                message_id, model, blocks, stop_reason, input_tokens, output_tokens
            ),
            headers={"request-id": f"req_{message_id}"},
        ), summary


def _usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def _error(status: int, kind: str, message: str) -> tuple[Reply, str]:
    document = {"type": "error", "error": {"type": kind, "message": message}}
    return Reply(status, document), f"error {status} {kind}"


def message_events(
    message_id: str,
    model: str,
    blocks: list[dict[str, Any]],
    stop_reason: str,
    input_tokens: int,
    output_tokens: int,
) -> list[SseEvent]:
    """The event stream of one assistant message made of `blocks`."""
    start_usage = _usage(input_tokens, 1)
    events = [
        SseEvent(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                },
            },
        ),
        SseEvent("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(blocks):
        if block["type"] == "tool_use":
            opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            raw = json.dumps(block["input"])
            deltas = [
                {"type": "input_json_delta", "partial_json": raw[i : i + JSON_CHUNK]}
                for i in range(0, len(raw), JSON_CHUNK)
            ]
            deltas.insert(0, {"type": "input_json_delta", "partial_json": ""})
        else:
            opening = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": block["text"]}]
        events.append(
            SseEvent(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opening},
            )
        )
        for delta in deltas:
            events.append(
                SseEvent(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        events.append(
            SseEvent("content_block_stop", {"type": "content_block_stop", "index": index})
        )
    events.append(
        SseEvent(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
        )
    )
    events.append(SseEvent("message_stop", {"type": "message_stop"}))
    return events
