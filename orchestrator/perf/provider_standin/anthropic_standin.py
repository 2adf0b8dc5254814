"""A stand-in for Anthropic's Messages API, its "model" the scripted mailbox driver.

`POST /v1/messages` answers with the server-sent events the real API sends
(`message_start`, `ping`, `content_block_start` / `content_block_delta` /
`content_block_stop` for text and for `tool_use` with `input_json_delta`,
`message_delta` with the stop reason and usage, `message_stop`), or with one JSON
message when the request does not stream. `POST /v1/messages/count_tokens` answers an
estimate, `HEAD /` and `GET /` answer 200, anything else 404 in the API's error shape.

Usage varies per generation request (see `message_usage`), the cache figures nonzero on
some: `message_start.message.usage` holds input_tokens, cache_creation_input_tokens,
cache_read_input_tokens and `output_tokens: 1`; `message_delta.usage.output_tokens` the
final, cumulative count, with `server_tool_use.web_search_requests` when web searches are
reported (only in usage: no server tool blocks appear in the content). A non-streamed
message carries the same figures in its `usage`. count_tokens reports no usage: only its
`input_tokens` estimate, as the API does. Faults answer 429 `rate_limit_error` (with
`retry-after`) and 529 `overloaded_error`, in the API's error shape.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mailroom.orchestrator.perf.provider_standin.driver import (
    Conversation,
    DriverSettings,
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
    even_only,
    new_id,
    summarize_tools,
    two_in_three,
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
    """`delta_repeats_usage`: `message_delta.usage` also repeats the cumulative input and
    cache figures of `message_start` (as the API does in newer versions), not only
    `output_tokens`: a meter that adds the two events' figures counts them twice."""

    name = "anthropic"
    generation_route = "/v1/messages"

    def __init__(
        self,
        settings: DriverSettings | None = None,
        *,
        answer_model: str | None = None,
        web_search_requests: int = 0,
        delta_repeats_usage: bool = False,
        think_s: float = 0.0,
        steady_usage: bool = False,
    ) -> None:
        super().__init__(
            settings,
            answer_model=answer_model,
            web_search_requests=web_search_requests,
            think_s=think_s,
            steady_usage=steady_usage,
        )
        self.delta_repeats_usage = delta_repeats_usage

    def handle(self, request: Request) -> tuple[Reply, str]:
        if (probe := self.root(request)) is not None:
            return probe
        route = request.route.rstrip("/")
        if request.method == "POST" and route == "/v1/messages/count_tokens":
            # Not a generation: the API answers only an estimate of `input_tokens`, no
            # billed usage, and the ledger does not count it.
            tokens = approximate_tokens(request.body)
            return Reply(200, {"input_tokens": tokens}), f"count_tokens {tokens}"
        if request.method == "POST" and route == self.generation_route:
            return self.generate(request)
        return _error(404, "not_found_error", f"{request.method} {request.route} is not served")

    def answer(self, request: Request, body: dict[str, Any], admission: Admission) -> Answer:
        requested = str(body.get("model", "stand-in"))
        model = admission.answer_model or requested
        tool = shell_tool(body)
        move: Move
        if tool is None:
            move = FinalText(SIDE_REQUEST_TEXT)
        else:
            move = next_move(conversation_of(body), self.settings)
        message_id = new_id("msg_standin_", next(self._ids))
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
            f" model={requested} stream={bool(body.get('stream'))}"
            f" messages={len(body.get('messages') or [])}"
            f" tools={len(summarize_tools(body.get('tools')))}"
        )
        if model != requested:
            summary += f" answered-as={model}"
        usage = message_usage(
            self.usage_number(admission),
            approximate_tokens(request.body),
            max(1, len(json.dumps(blocks)) // 4),
            admission.web_search_requests,
        )
        if not body.get("stream"):
            document = {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": blocks,
                "stop_reason": stop_reason,
                "stop_sequence": None,
                "usage": usage_fields(usage),
            }
            return Answer(Reply(200, document), summary, model, 0)
        events = message_events(
            message_id, model, blocks, stop_reason, usage, delta_repeats=self.delta_repeats_usage
        )
        reply = Reply(200, events=events, headers={"request-id": f"req_{message_id}"})
        return Answer(reply, summary, model, len(events) - 2)

    def invalid(self, message: str) -> Reply:
        return _error(400, "invalid_request_error", message)[0]

    def rate_limited(self, retry_after_s: int) -> Reply:
        document = _error_document(
            "rate_limit_error", "Number of requests has exceeded your rate limit"
        )
        return Reply(429, document, headers={"retry-after": str(retry_after_s)})

    def overloaded(self, retry_after_s: int | None) -> Reply:
        headers = {} if retry_after_s is None else {"retry-after": str(retry_after_s)}
        return Reply(529, _error_document("overloaded_error", "Overloaded"), headers=headers)

    def stream_usage(self, events: Sequence[SseEvent]) -> Usage | None:
        fields: dict[str, Any] | None = None
        for event in events:
            if event.name == "message_start":
                fields = dict(event.data["message"]["usage"])
            elif event.name == "message_delta" and fields is not None:
                fields.update(event.data.get("usage") or {})  # cumulative: replaces
        return None if fields is None else usage_of(fields)

    def document_usage(self, document: Any) -> Usage | None:
        if isinstance(document, dict) and isinstance(document.get("usage"), dict):
            return usage_of(document["usage"])
        return None


def message_usage(number: int, prompt_tokens: int, content_tokens: int, web_searches: int) -> Usage:
    """The usage of generation request `number`: input_tokens = prompt_tokens + number,
    cache_creation_input_tokens = two_in_three(number), cache_read_input_tokens =
    even_only(number), output_tokens = content_tokens + number, web searches as asked."""
    return Usage(
        input_tokens=prompt_tokens + number,
        output_tokens=content_tokens + number,
        cache_read_tokens=even_only(number),
        cache_write_tokens=two_in_three(number),
        server_tool_uses=web_searches,
    )


def usage_fields(usage: Usage, *, output_tokens: int | None = None) -> dict[str, Any]:
    """`usage` in the API's fields (`output_tokens` replaced when given)."""
    fields: dict[str, Any] = {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "output_tokens": usage.output_tokens if output_tokens is None else output_tokens,
    }
    if usage.server_tool_uses:
        fields["server_tool_use"] = {"web_search_requests": usage.server_tool_uses}
    fields["service_tier"] = "standard"
    return fields


def usage_of(fields: dict[str, Any]) -> Usage:
    """The figures of an API `usage` object."""
    server = fields.get("server_tool_use") or {}
    return Usage(
        input_tokens=int(fields.get("input_tokens") or 0),
        output_tokens=int(fields.get("output_tokens") or 0),
        cache_read_tokens=int(fields.get("cache_read_input_tokens") or 0),
        cache_write_tokens=int(fields.get("cache_creation_input_tokens") or 0),
        server_tool_uses=int(server.get("web_search_requests") or 0),
    )


def _error_document(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _error(status: int, kind: str, message: str) -> tuple[Reply, str]:
    return Reply(status, _error_document(kind, message)), f"error {status} {kind}"


def message_events(
    message_id: str,
    model: str,
    blocks: list[dict[str, Any]],
    stop_reason: str,
    usage: Usage,
    *,
    delta_repeats: bool = False,
) -> list[SseEvent]:
    """The event stream of one assistant message made of `blocks`: `message_start`
    reports the input and cache figures with `output_tokens: 1`, `message_delta` the
    final (cumulative) `output_tokens` and any web searches."""
    start_usage = {
        k: v for k, v in usage_fields(usage, output_tokens=1).items() if k != "server_tool_use"
    }
    delta_usage: dict[str, Any] = {"output_tokens": usage.output_tokens}
    if delta_repeats:
        delta_usage = {k: v for k, v in usage_fields(usage).items() if k not in ("service_tier",)}
    elif usage.server_tool_uses:
        delta_usage["server_tool_use"] = {"web_search_requests": usage.server_tool_uses}
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
                "usage": delta_usage,
            },
        )
    )
    events.append(SseEvent("message_stop", {"type": "message_stop"}))
    return events
