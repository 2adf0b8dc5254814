"""What a provider's answer says of itself: the model that answered, its tokens, whether
its final usage arrived, and any error it reported.

The gateway streams each upstream body to the agent as it arrives and feeds every chunk
to a meter (`response_meter`); the meter keeps a few numbers and names, never the body,
and never text, prompts or reasoning (an event's bytes are held only until the event
ends, a JSON body's only until it is read, each up to a cap).

- Anthropic's Messages API streams server-sent events: `message_start` (the model, the
  usage so far), `message_delta` (cumulative usage: whatever fields it carries replace
  those seen before), `message_stop` (the end), `error`. Unstreamed, it answers one JSON
  message with the same `usage` (or `{"type": "error", "error": {...}}`). Its
  `input_tokens` exclude cached tokens; `cache_creation.ephemeral_1h_input_tokens` is the
  part of the cache written for an hour, which is billed apart.
- OpenAI's Responses API streams events whose data's `type` names them: the response's
  model in `response.created` / `.in_progress`, its usage (`input_tokens` including
  `input_tokens_details.cached_tokens`) in `response.completed`, `.failed` or
  `.incomplete`, and `error`. Hosted tool calls (`web_search_call`, ...) are output items,
  counted once each whether seen in `response.output_item.done` or in the final output.
  It reports no cache writes (None). Unstreamed, it answers the response object.

- Google's Gemini API streams `data:` events with no name (`?alt=sse`), each a
  GenerateContentResponse: `modelVersion` (the model that answered), `usageMetadata`
  (the usage so far: the last one said counts; proto3 JSON leaves a zero count out),
  `candidates` (a `finishReason` once the answer ends; `groundingMetadata`'s
  `webSearchQueries` for a Google Search the provider ran). Unstreamed, it answers one
  such object; an error is `{"error": {"code", "message", "status"}}`. Its
  `promptTokenCount` includes `cachedContentTokenCount`; the input is the prompt plus
  `toolUsePromptTokenCount`, the output `candidatesTokenCount` plus
  `thoughtsTokenCount` (thinking is billed as output). It reports no cache writes
  (None). The requested model is named in the path (`/v1beta/models/{model}:...`),
  not the body.

A provider's values are trusted only as what they claim to be: a token count must be a
non-negative int (not a bool, a float, a string, nor past `MAX_TOKENS`), a name a
non-empty string of at most `MAX_NAME` characters. Anything else counts as not said
(None); a JSON null leaves the value an earlier event gave. The meter never raises on a
body, however hostile.
"""

from __future__ import annotations

import importlib
import json
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from mailroom.orchestrator.records.provider import ProviderKind

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_EVENT_BYTES",
    "MAX_NAME",
    "MAX_REQUEST_BYTES",
    "MAX_TOKENS",
    "Metered",
    "ProviderKind",
    "ResponseMeter",
    "requested_model",
    "response_meter",
]

# One server-sent event's bytes past this are passed over (counted in `Metered.skipped`),
# never buffered: a provider's events are kilobytes, its largest (a final response with
# its whole output) a few megabytes.
MAX_EVENT_BYTES = 32 << 20
# A JSON answer past this is not read: its usage stays unknown.
MAX_BODY_BYTES = 32 << 20
# A request body (decoded) past this is not searched for its model.
MAX_REQUEST_BYTES = 32 << 20
# More tokens than any one answer could hold: a count past it is not believed (and a
# float price times it stays finite).
MAX_TOKENS = 10**15
MAX_NAME = 200
# Output items remembered so that each hosted tool call counts once; past this many the
# count is unknown rather than possibly doubled.
MAX_TRACKED_ITEMS = 4096

_LINE_END = re.compile(rb"\r\n|\r|\n")
# OpenAI's output items for tools the provider runs itself (its client runs the others).
_HOSTED_TOOL_CALLS = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
    }
)
# OpenAI's final events, and the response status each ends with.
_OPENAI_FINALS = {
    "response.completed": "completed",
    "response.failed": "failed",
    "response.incomplete": "incomplete",
}


@dataclass(frozen=True)
class Metered:
    """What one provider response said of itself (None: it did not say)."""

    model: str | None = None  # the model the provider says answered
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    # The part of `cache_write_tokens` written to live an hour (Anthropic bills it at a
    # higher rate than the default five minutes).
    cache_write_1h_tokens: int | None = None
    server_tool_uses: int | None = None  # server-side tools the provider ran, all kinds
    web_search_requests: int | None = None  # of which web searches
    # The tier that served it ("standard", "default", "priority", "flex", "batch", ...):
    # a price table's prices are one tier's.
    service_tier: str | None = None
    # The final usage was seen (`message_stop`, `response.completed` / `.failed` /
    # `.incomplete`, or a whole JSON answer), and no event that could have changed it was
    # passed over.
    complete: bool = False
    error: str | None = None  # the type of an error the provider reported in the body
    skipped: int = 0  # events (or a JSON body) passed over for their size


class ResponseMeter(Protocol):
    """Fed each chunk of one response body as it passes to the agent, then finished once
    the body ended or was cut (`finish` again gives the same answer; a chunk fed after it
    is ignored)."""

    def feed(self, chunk: bytes) -> None: ...

    def finish(self) -> Metered: ...


def response_meter(kind: ProviderKind, content_type: str | None, status: int) -> ResponseMeter:
    """A meter for one upstream response: a server-sent event stream when the content
    type says so and the status is a success, else a JSON body (an error's, from 400 on:
    its type is read, never usage)."""
    reader: _Reader = READERS[kind]()
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if status < 400 and media == "text/event-stream":
        return _StreamMeter(reader)
    return _BodyMeter(reader, status)


def requested_model(
    body: bytes,
    content_encoding: str | None,
    *,
    path: str = "",
    kind: ProviderKind = "anthropic",
) -> str | None:
    """The model a request asks for, or None. The Gemini API names it in the path
    (`path`, without the gateway's base path); the others in the JSON body's `"model"`
    (None: an encoding not understood, a body or its decoding past
    `MAX_REQUEST_BYTES`, not JSON, no such name). Decodes gzip, deflate and identity, and
    zstd where the `zstandard` module is installed."""
    if kind == "gemini":
        named = _MODEL_IN_PATH.match(path)
        return _name(named.group(1)) if named else None
    decoded = _decoded(body, content_encoding)
    if decoded is None:
        return None
    try:
        return _name(_first_member(decoded.decode("utf-8"), "model"))
    except (ValueError, RecursionError):
        return None


_BLANK = re.compile(r"[ \t\n\r]*")
_MODEL_IN_PATH = re.compile(r"^/v1[a-z0-9]*/(?:models|tunedModels)/([A-Za-z0-9._-]+):")
_DECODER = json.JSONDecoder()


def _first_member(text: str, name: str) -> object:
    """The value of the top-level object's first member `name` (None if it has none),
    read member by member and no further: the gateway reads it on its serving thread
    before the answer streams, and clients put `model` first, ahead of megabytes of
    messages and images. A text that is not a JSON object raises `ValueError`."""
    at = _BLANK.match(text).end()  # type: ignore[union-attr]
    if text[at : at + 1] != "{":
        raise ValueError("not a JSON object")
    at = _BLANK.match(text, at + 1).end()  # type: ignore[union-attr]
    if text[at : at + 1] == "}":
        return None
    while True:
        key, at = _DECODER.raw_decode(text, at)
        at = _BLANK.match(text, at).end()  # type: ignore[union-attr]
        if not isinstance(key, str) or text[at : at + 1] != ":":
            raise ValueError("not a JSON object")
        value, at = _DECODER.raw_decode(text, _BLANK.match(text, at + 1).end())  # type: ignore[union-attr]
        if key == name:
            return value
        at = _BLANK.match(text, at).end()  # type: ignore[union-attr]
        if text[at : at + 1] != ",":
            return None
        at = _BLANK.match(text, at + 1).end()  # type: ignore[union-attr]


def _tokens(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= MAX_TOKENS else None


def _name(value: object) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= MAX_NAME else None


def _said(fields: dict[str, Any], key: str, before: int | None) -> int | None:
    """A count as `fields` report it: absent or null, what was known before."""
    value = fields.get(key)
    return before if value is None else _tokens(value)


def _said_name(fields: dict[str, Any], key: str, before: str | None) -> str | None:
    value = fields.get(key)
    return before if value is None else _name(value)


def _error_type(error: object) -> str:
    """An error object's type (or code, or Google's status); "error" when it names none
    readably."""
    if isinstance(error, dict):
        for key in ("type", "code", "status"):
            name = _name(error.get(key))
            if name is not None:
                return name
    return "error"


class _Reader:
    """What one response has said so far; the provider's subclass reads its events and
    documents into it."""

    # Events that may carry the usage, the model or the end: one passed over for its
    # size (or unnamed) leaves the usage in doubt.
    usage_events: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self.model: str | None = None
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.cache_read_tokens: int | None = None
        self.cache_write_tokens: int | None = None
        self.cache_write_1h_tokens: int | None = None
        self.server_tool_uses: int | None = None
        self.web_search_requests: int | None = None
        self.service_tier: str | None = None
        self.complete = False
        self.error: str | None = None
        self.skipped = 0
        self.doubtful = False

    def event(self, kind: str | None, data: dict[str, Any]) -> None:
        raise NotImplementedError

    def document(self, document: dict[str, Any]) -> None:
        raise NotImplementedError

    def passed_over(self, name: str | None) -> None:
        self.skipped += 1
        if name is None or name in self.usage_events:
            self.doubtful = True

    def result(self) -> Metered:
        return Metered(
            model=self.model,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_read_tokens=self.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens,
            cache_write_1h_tokens=self.cache_write_1h_tokens,
            server_tool_uses=self.server_tool_uses,
            web_search_requests=self.web_search_requests,
            service_tier=self.service_tier,
            complete=self.complete and not self.doubtful,
            error=self.error,
            skipped=self.skipped,
        )


class _Anthropic(_Reader):
    usage_events = frozenset({"message_start", "message_delta", "message_stop", "error"})

    def event(self, kind: str | None, data: dict[str, Any]) -> None:
        if kind == "message_start":
            message = data.get("message")
            if isinstance(message, dict):
                self.model = _said_name(message, "model", self.model)
                self._usage(message.get("usage"))
        elif kind == "message_delta":
            self._usage(data.get("usage"))
        elif kind == "message_stop":
            self.complete = True
        elif kind == "error":
            self.error = _error_type(data.get("error"))

    def document(self, document: dict[str, Any]) -> None:
        if document.get("type") == "error":
            self.error = _error_type(document.get("error"))
            return
        self.model = _said_name(document, "model", self.model)
        self._usage(document.get("usage"))
        self.complete = document.get("type") == "message"

    def _usage(self, usage: object) -> None:
        if usage is None:
            return
        if not isinstance(usage, dict):  # said, unreadably: nothing known of it now
            self.input_tokens = self.output_tokens = None
            self.cache_read_tokens = self.cache_write_tokens = self.cache_write_1h_tokens = None
            return
        self.input_tokens = _said(usage, "input_tokens", self.input_tokens)
        self.output_tokens = _said(usage, "output_tokens", self.output_tokens)
        self.cache_read_tokens = _said(usage, "cache_read_input_tokens", self.cache_read_tokens)
        self.cache_write_tokens = _said(
            usage, "cache_creation_input_tokens", self.cache_write_tokens
        )
        self.service_tier = _said_name(usage, "service_tier", self.service_tier)
        creation = usage.get("cache_creation")
        if isinstance(creation, dict):
            self.cache_write_1h_tokens = _said(
                creation, "ephemeral_1h_input_tokens", self.cache_write_1h_tokens
            )
        elif creation is not None:
            self.cache_write_1h_tokens = None
        tools = usage.get("server_tool_use")
        if isinstance(tools, dict):
            self.web_search_requests = _said(tools, "web_search_requests", self.web_search_requests)
            counts = [
                _tokens(value)
                for key, value in tools.items()
                if isinstance(key, str) and key.endswith("_requests") and value is not None
            ]
            known = [count for count in counts if count is not None]
            self.server_tool_uses = sum(known) if len(known) == len(counts) else None
        elif tools is not None:
            self.server_tool_uses = self.web_search_requests = None


class _OpenAI(_Reader):
    usage_events = frozenset(
        {
            "response.created",
            "response.in_progress",
            "response.queued",
            "response.output_item.done",
            "response.completed",
            "response.failed",
            "response.incomplete",
            "error",
        }
    )

    def __init__(self) -> None:
        super().__init__()
        self._item_ids: set[str] = set()
        self._item_indices: set[int] = set()
        self._hosted = 0
        self._searches = 0
        self._items_seen = False
        self._items_lost = False

    def event(self, kind: str | None, data: dict[str, Any]) -> None:
        if kind in ("response.created", "response.in_progress", "response.queued"):
            response = data.get("response")
            if isinstance(response, dict):
                self._named(response)
        elif kind == "response.output_item.done":
            self._items_seen = True
            self._item(data.get("item"), data.get("output_index"))
        elif kind in _OPENAI_FINALS:
            response = data.get("response")
            if isinstance(response, dict):
                self._final(response, _OPENAI_FINALS[kind])
            else:
                self.complete = True
                if kind != "response.completed":
                    self.error = _OPENAI_FINALS[kind]
        elif kind == "error":
            error = data.get("error")
            if isinstance(error, dict):
                self.error = _error_type(error)
            else:
                self.error = _name(data.get("code")) or "error"

    def document(self, document: dict[str, Any]) -> None:
        if isinstance(document.get("error"), dict) and document.get("object") != "response":
            self.error = _error_type(document["error"])
            return
        status = document.get("status")
        if document.get("object") == "response" and status in _OPENAI_FINALS.values():
            self._final(document, str(status))
        else:
            self._named(document)

    def result(self) -> Metered:
        if self._items_seen and not self._items_lost:
            self.server_tool_uses, self.web_search_requests = self._hosted, self._searches
        else:
            self.server_tool_uses = self.web_search_requests = None
        return super().result()

    def _named(self, response: dict[str, Any]) -> None:
        self.model = _said_name(response, "model", self.model)
        self.service_tier = _said_name(response, "service_tier", self.service_tier)

    def _final(self, response: dict[str, Any], status: str) -> None:
        self._named(response)
        self.complete = True
        usage = response.get("usage")
        if isinstance(usage, dict):
            self.input_tokens = _said(usage, "input_tokens", self.input_tokens)
            self.output_tokens = _said(usage, "output_tokens", self.output_tokens)
            details = usage.get("input_tokens_details")
            if isinstance(details, dict):
                self.cache_read_tokens = _said(details, "cached_tokens", self.cache_read_tokens)
            elif details is not None:
                self.cache_read_tokens = None
        elif usage is not None:
            self.input_tokens = self.output_tokens = self.cache_read_tokens = None
        output = response.get("output")
        if isinstance(output, list):
            self._items_seen = True
            for index, item in enumerate(output):
                self._item(item, index)
        if status == "failed":
            self.error = _error_type(response.get("error"))
        elif status == "incomplete":
            details = response.get("incomplete_details")
            reason = _name(details.get("reason")) if isinstance(details, dict) else None
            self.error = f"incomplete: {reason}" if reason else "incomplete"

    def _item(self, item: object, index: object) -> None:
        """Count a hosted tool call once, known by its id or its place in the output."""
        if not isinstance(item, dict) or item.get("type") not in _HOSTED_TOOL_CALLS:
            return
        item_id = _name(item.get("id"))
        position = _tokens(index)
        if (item_id is not None and item_id in self._item_ids) or (
            position is not None and position in self._item_indices
        ):
            return
        if len(self._item_ids) + len(self._item_indices) >= MAX_TRACKED_ITEMS:
            self._items_lost = True
            return
        if item_id is not None:
            self._item_ids.add(item_id)
        if position is not None:
            self._item_indices.add(position)
        self._hosted += 1
        if item.get("type") == "web_search_call":
            self._searches += 1


class _Gemini(_Reader):
    # Its events are unnamed: one passed over leaves the usage in doubt (`passed_over`).
    usage_events = frozenset()

    def __init__(self) -> None:
        super().__init__()
        self._queries: set[str] = set()  # the Google Search queries the provider ran
        self._queries_lost = False

    def event(self, kind: str | None, data: dict[str, Any]) -> None:
        self.document(data)

    def document(self, document: dict[str, Any]) -> None:
        error = document.get("error")
        if error is not None:
            self.error = _error_type(error)
            return
        self.model = _said_name(document, "modelVersion", self.model)
        usage = document.get("usageMetadata")
        if isinstance(usage, dict):
            self._usage(usage)
        elif usage is not None:
            self.input_tokens = self.output_tokens = self.cache_read_tokens = None
        candidates = document.get("candidates")
        for candidate in candidates if isinstance(candidates, list) else []:
            if not isinstance(candidate, dict):
                continue
            if _name(candidate.get("finishReason")) is not None:
                self.complete = True
            self._grounding(candidate.get("groundingMetadata"))

    def result(self) -> Metered:
        searches = None if self._queries_lost else len(self._queries)
        self.server_tool_uses = self.web_search_requests = searches
        return super().result()

    def _usage(self, usage: dict[str, Any]) -> None:
        """One usageMetadata: the whole usage so far (a count left out is zero)."""

        def total(*keys: str) -> int | None:
            counts = [0 if usage.get(key) is None else _tokens(usage.get(key)) for key in keys]
            known = [c for c in counts if c is not None]
            return sum(known) if len(known) == len(counts) else None

        self.input_tokens = total("promptTokenCount", "toolUsePromptTokenCount")
        self.output_tokens = total("candidatesTokenCount", "thoughtsTokenCount")
        self.cache_read_tokens = total("cachedContentTokenCount")

    def _grounding(self, grounding: object) -> None:
        if grounding is None:
            return
        queries = grounding.get("webSearchQueries") if isinstance(grounding, dict) else None
        if queries is None and isinstance(grounding, dict):
            return
        names = [_name(q) for q in queries] if isinstance(queries, list) else [None]
        if None in names or len(self._queries) + len(names) > MAX_TRACKED_ITEMS:
            self._queries_lost = True
            return
        self._queries.update(n for n in names if n is not None)


READERS: dict[ProviderKind, Callable[[], _Reader]] = {
    "anthropic": _Anthropic,
    "openai_responses": _OpenAI,
    "gemini": _Gemini,
}


class _EventStream:
    """Server-sent events (WHATWG HTML, "Server-sent events", the event stream
    interpretation) from bytes split anywhere: lines end in CRLF, LF or CR (a CRLF may
    straddle two chunks); `data:` lines join with LF; `event:` names the event; a blank
    line dispatches it. An event whose bytes pass `MAX_EVENT_BYTES` is dropped as it
    arrives and reported once it ends; an unfinished event at the end is discarded, as a
    client discards it."""

    def __init__(
        self,
        deliver: Callable[[str | None, bytes], None],
        passed_over: Callable[[str | None], None],
    ) -> None:
        self._deliver = deliver
        self._passed_over = passed_over
        self._line = bytearray()
        self._data = bytearray()
        self._has_data = False
        self._name: str | None = None
        self._skipping = False  # the current event is being passed over
        self._line_dropped = False  # the current line had bytes, dropped
        self._after_cr = False  # the last chunk ended in CR: a leading LF completes it

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        start = 1 if self._after_cr and chunk[:1] == b"\n" else 0
        for end in _LINE_END.finditer(chunk, start):
            self._extend(chunk[start : end.start()])
            self._end_line()
            start = end.end()
        self._extend(chunk[start:])
        self._after_cr = chunk.endswith(b"\r")

    def close(self) -> None:
        """Drop whatever an unfinished event left."""
        self._line.clear()
        self._reset()

    def _extend(self, piece: bytes) -> None:
        if not piece:
            return
        if not self._skipping and len(self._line) + len(self._data) + len(piece) > (
            MAX_EVENT_BYTES
        ):
            self._skipping = True
            self._line.clear()
            self._data.clear()
            self._has_data = False
        if self._skipping:
            self._line_dropped = True
        else:
            self._line += piece

    def _end_line(self) -> None:
        if self._skipping:
            if not self._line_dropped:
                self._passed_over(self._name)
                self._reset()
            self._line_dropped = False
            return
        line = bytes(self._line)
        self._line.clear()
        if not line:
            if self._has_data:
                self._deliver(self._name, bytes(self._data))
            self._reset()
            return
        if line.startswith(b":"):
            return  # a comment (a keep-alive)
        field, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            if self._has_data:
                self._data += b"\n"
            self._data += value
            self._has_data = True
        elif field == b"event":
            self._name = _event_name(value)

    def _reset(self) -> None:
        self._data.clear()
        self._has_data = False
        self._name = None
        self._skipping = False


def _event_name(value: bytes) -> str | None:
    try:
        return _name(value.decode("ascii"))
    except UnicodeDecodeError:
        return None


class _StreamMeter:
    """A server-sent event stream's meter: each event's JSON data, read as it ends."""

    def __init__(self, reader: _Reader) -> None:
        self._reader = reader
        self._events = _EventStream(self._event, reader.passed_over)
        self._result: Metered | None = None

    def feed(self, chunk: bytes) -> None:
        if self._result is None:
            self._events.feed(chunk)

    def finish(self) -> Metered:
        if self._result is None:
            self._result = self._reader.result()
            self._events.close()
        return self._result

    def _event(self, name: str | None, data: bytes) -> None:
        try:
            document = json.loads(data)
        except (ValueError, RecursionError):
            return  # not JSON (OpenAI's `[DONE]`, a keep-alive): says nothing
        if isinstance(document, dict):
            kind = document.get("type")
            self._reader.event(kind if isinstance(kind, str) else name, document)


class _BodyMeter:
    """A JSON answer's meter: the body kept up to `MAX_BODY_BYTES`, read at the end."""

    def __init__(self, reader: _Reader, status: int) -> None:
        self._reader = reader
        self._status = status
        self._body = bytearray()
        self._over = False
        self._result: Metered | None = None

    def feed(self, chunk: bytes) -> None:
        if self._result is not None or self._over:
            return
        if len(self._body) + len(chunk) > MAX_BODY_BYTES:
            self._over = True
            self._body = bytearray()
            return
        self._body += chunk

    def finish(self) -> Metered:
        if self._result is None:
            if self._over:
                self._reader.skipped += 1
            else:
                self._read(bytes(self._body))
            self._body = bytearray()
            self._result = self._reader.result()
        return self._result

    def _read(self, body: bytes) -> None:
        try:
            document = json.loads(body)
        except (ValueError, RecursionError):
            return
        if not isinstance(document, dict):
            return
        if self._status >= 400:
            self._reader.error = _error_type(document.get("error"))
        else:
            self._reader.document(document)


def _decoded(body: bytes, content_encoding: str | None) -> bytes | None:
    """The body with its content codings undone (the last applied first), or None."""
    if len(body) > MAX_REQUEST_BYTES:
        return None
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    data: bytes | None = body
    for coding in reversed(codings):
        if data is None:
            return None
        if coding == "identity":
            continue
        if coding in ("gzip", "x-gzip"):
            data = _inflate(data, 16 + zlib.MAX_WBITS)
        elif coding == "deflate":  # zlib-wrapped as HTTP says, or raw as some clients send
            wrapped = _inflate(data, zlib.MAX_WBITS)
            data = wrapped if wrapped is not None else _inflate(data, -zlib.MAX_WBITS)
        elif coding == "zstd":
            data = _unzstd(data)
        else:
            return None
    return data


def _inflate(data: bytes, wbits: int) -> bytes | None:
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(data, MAX_REQUEST_BYTES + 1)
    except zlib.error:
        return None
    if len(out) > MAX_REQUEST_BYTES or not inflater.eof:
        return None
    return out


def _unzstd(data: bytes) -> bytes | None:
    try:
        zstandard = importlib.import_module("zstandard")
    except ImportError:
        return None
    out = bytearray()
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(data)
        while len(out) <= MAX_REQUEST_BYTES:
            piece = reader.read(MAX_REQUEST_BYTES + 1 - len(out))
            if not piece:
                break
            out += piece
    except Exception:  # zstandard's own error types: a body that is not zstd
        return None
    return bytes(out) if len(out) <= MAX_REQUEST_BYTES else None
