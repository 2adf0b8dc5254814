"""A stand-in for Google's Gemini API, its "model" the scripted mailbox driver.

`POST /v1beta/models/{model}:streamGenerateContent?alt=sse` answers with the unnamed
server-sent events the real API sends, each a GenerateContentResponse: first the
answer's part (a `functionCall` of the declared shell tool, or text) with the usage so
far, then a last chunk with `finishReason` `STOP`, the whole `usageMetadata` and
`modelVersion`. `:generateContent` answers one such object; a side request with a
response schema (the CLI's routing and next-speaker checks) is answered with an object
of that schema. `:countTokens` answers an estimate. `HEAD /` and `GET /` answer 200,
anything else 404 in Google's error shape.

Usage varies per generation request (see `http_standin.varied_usage`, its reasoning
tokens the thoughts): `promptTokenCount` includes `cachedContentTokenCount` (nonzero on
some), `thoughtsTokenCount` on some, zero counts left out as proto3 JSON leaves them.
Reported web searches are `groundingMetadata` `webSearchQueries` in the last chunk.
Faults answer 429 `RESOURCE_EXHAUSTED` (with `retry-after`) and 503 `UNAVAILABLE`, in
Google's error shape.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
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
    varied_usage,
)

SIDE_REQUEST_TEXT = "OK"
SHELL_TOOL = "run_shell_command"
ROUTE = re.compile(
    r"^/v1beta/models/([A-Za-z0-9._-]+):(streamGenerateContent|generateContent|countTokens)$"
)


def _texts(value: Any) -> list[str]:
    """Every string inside `value` (a tool's response), in order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _texts(item)]
    if isinstance(value, list):
        return [text for item in value for text in _texts(item)]
    return []


def conversation_of(body: dict[str, Any]) -> Conversation:
    """The prompt (every user text part) and the function responses, in order."""
    prompts: list[str] = []
    results: list[str] = []
    for content in body.get("contents") or []:
        if not isinstance(content, dict):
            continue
        for part in content.get("parts") or []:
            if not isinstance(part, dict):
                continue
            if content.get("role") == "user" and isinstance(part.get("text"), str):
                prompts.append(part["text"])
            elif isinstance(part.get("functionResponse"), dict):
                results.append("\n".join(_texts(part["functionResponse"].get("response"))))
    return Conversation("\n".join(prompts), tuple(results))


def _declarations(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for tool in body.get("tools") or []:
        for declaration in (
            (tool.get("functionDeclarations") or []) if isinstance(tool, dict) else []
        ):
            if isinstance(declaration, dict) and isinstance(declaration.get("name"), str):
                found[declaration["name"]] = declaration
    return found


def shell_arguments(body: dict[str, Any], move: ShellCommand) -> dict[str, Any] | None:
    """The declared shell tool's arguments that run `move`, or None (no shell tool)."""
    declaration = _declarations(body).get(SHELL_TOOL)
    if declaration is None:
        return None
    schema = declaration.get("parametersJsonSchema") or declaration.get("parameters") or {}
    properties = schema.get("properties") or {}
    arguments: dict[str, Any] = {"command": move.command}
    if "description" in properties:
        arguments["description"] = f"{move.purpose} through the mailbox"
    return arguments


def schema_answer(schema: Any) -> Any:
    """A small value of a JSON schema: the first enum value, a string, false, 0; an
    object with its required members (a next-speaker check is told the user speaks)."""
    if not isinstance(schema, dict):
        return SIDE_REQUEST_TEXT
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        properties = schema.get("properties") or {}
        answer: dict[str, Any] = {}
        for name in schema.get("required") or list(properties):
            answer[name] = "user" if name == "next_speaker" else schema_answer(properties.get(name))
        return answer
    return {"string": "stand-in", "boolean": False, "integer": 0, "number": 0, "array": []}.get(
        kind, SIDE_REQUEST_TEXT
    )


def usage_metadata(usage: Usage) -> dict[str, int]:
    """`usage` in the API's fields, zero counts left out."""
    fields = {
        "promptTokenCount": usage.input_tokens,
        "candidatesTokenCount": usage.output_tokens - usage.reasoning_tokens,
        "cachedContentTokenCount": usage.cache_read_tokens,
        "thoughtsTokenCount": usage.reasoning_tokens,
        "totalTokenCount": usage.input_tokens + usage.output_tokens,
    }
    return {name: value for name, value in fields.items() if value}


def usage_of(document: Any) -> Usage | None:
    """The figures of a response's `usageMetadata` and its web search queries."""
    if not isinstance(document, dict) or not isinstance(document.get("usageMetadata"), dict):
        return None
    fields = document["usageMetadata"]
    thoughts = int(fields.get("thoughtsTokenCount") or 0)
    queries = {
        query
        for candidate in document.get("candidates") or []
        for query in ((candidate.get("groundingMetadata") or {}).get("webSearchQueries") or [])
    }
    return Usage(
        input_tokens=int(fields.get("promptTokenCount") or 0),
        output_tokens=int(fields.get("candidatesTokenCount") or 0) + thoughts,
        cache_read_tokens=int(fields.get("cachedContentTokenCount") or 0),
        reasoning_tokens=thoughts,
        server_tool_uses=len(queries),
    )


def _error(status: int, code: str, message: str) -> Reply:
    return Reply(status, {"error": {"code": status, "message": message, "status": code}})


class GeminiStandIn(ScriptedStandIn):
    name = "gemini"
    generation_route = "/v1beta/models/{model}:streamGenerateContent"

    substitution_free = True  # Gemini CLI's shell tool refuses a command substitution

    def handle(self, request: Request) -> tuple[Reply, str]:
        if (probe := self.root(request)) is not None:
            return probe
        route = ROUTE.match(request.route)
        if request.method == "POST" and route is not None:
            if route.group(2) == "countTokens":
                estimate = approximate_tokens(request.body)
                return Reply(200, {"totalTokens": estimate}), "count_tokens"
            return self.generate(request)
        return _error(404, "NOT_FOUND", f"{request.method} {request.route} is not served"), "404"

    def requested_model(self, request: Request, body: Any) -> str | None:
        route = ROUTE.match(request.route)
        return route.group(1) if route else None

    def streamed(self, request: Request, body: Any) -> bool:
        return request.route.endswith(":streamGenerateContent")

    def answer(self, request: Request, body: dict[str, Any], admission: Admission) -> Answer:
        requested = self.requested_model(request, body) or "stand-in"
        model = admission.answer_model or requested
        config = body.get("generationConfig") or {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        has_shell = SHELL_TOOL in _declarations(body)
        move: Move = (
            next_move(conversation_of(body), self.settings)
            if has_shell
            else FinalText(SIDE_REQUEST_TEXT)
        )
        arguments = shell_arguments(body, move) if isinstance(move, ShellCommand) else None
        part: dict[str, Any]
        if arguments is not None and isinstance(move, ShellCommand):
            part = {"functionCall": {"name": SHELL_TOOL, "args": arguments}}
            summary = f"{SHELL_TOOL} {move.purpose}"
        elif schema is not None and not has_shell:
            part = {"text": json.dumps(schema_answer(schema))}
            summary = "side request (a schema)"
        else:
            part = {"text": move.text if isinstance(move, FinalText) else ""}
            summary = "text" if has_shell else "side request (no shell tool)"
        streamed = self.streamed(request, body)
        summary += (
            f" model={requested} stream={streamed} contents={len(body.get('contents') or [])}"
            f" tools={','.join(_declarations(body))}"
        )
        if model != requested:
            summary += f" answered-as={model}"
        usage = varied_usage(
            self.usage_number(admission),
            approximate_tokens(request.body),
            max(1, len(json.dumps(part)) // 4),
            admission.web_search_requests,
        )
        finished: dict[str, Any] = {"content": {"role": "model", "parts": [part]}}
        finished.update(finishReason="STOP", index=0)
        if admission.web_search_requests:
            queries = [f"stand-in search {i}" for i in range(admission.web_search_requests)]
            finished["groundingMetadata"] = {"webSearchQueries": queries}
        final = {
            "candidates": [finished],
            "usageMetadata": usage_metadata(usage),
            "modelVersion": model,
            "responseId": f"standin-{admission.number}",
        }
        if not streamed:
            return Answer(Reply(200, final), summary, model, 0)
        first = {
            "candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}],
            "usageMetadata": {"promptTokenCount": usage.input_tokens},
            "modelVersion": model,
            "responseId": final["responseId"],
        }
        last = {**final, "candidates": [{**finished, "content": {"role": "model", "parts": []}}]}
        return Answer(
            Reply(200, events=[SseEvent("", first), SseEvent("", last)]), summary, model, 1
        )

    def invalid(self, message: str) -> Reply:
        return _error(400, "INVALID_ARGUMENT", message)

    def rate_limited(self, retry_after_s: int) -> Reply:
        reply = _error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).")
        return Reply(429, reply.document, headers={"retry-after": str(retry_after_s)})

    def overloaded(self, retry_after_s: int | None) -> Reply:
        reply = _error(503, "UNAVAILABLE", "The model is overloaded. Please try again later.")
        headers = {} if retry_after_s is None else {"retry-after": str(retry_after_s)}
        return Reply(503, reply.document, headers=headers)

    def stream_usage(self, events: Sequence[SseEvent]) -> Usage | None:
        """The last usage the stream said (each chunk's is the whole so far)."""
        for event in reversed(events):
            usage = usage_of(event.data)
            if usage is not None:
                return usage
        return None

    def document_usage(self, document: Any) -> Usage | None:
        return usage_of(document)
