"""The stand-in providers' usage reporting, ledger, answering model, faults and web
search reports, checked over real HTTP on 127.0.0.1 with a plain client: every figure the
ledger sums is read back here from the answers themselves."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from mailroom.orchestrator.perf.provider_standin.anthropic_standin import AnthropicStandIn
from mailroom.orchestrator.perf.provider_standin.driver import DriverSettings
from mailroom.orchestrator.perf.provider_standin.http_standin import (
    LedgerTotals,
    ScriptedStandIn,
    UsageTotals,
)
from mailroom.orchestrator.perf.provider_standin.openai_standin import OpenAIStandIn

FAST = DriverSettings(act_decisions=2, wait_s=0.3, poll_s=0.05, max_waits=3)
PROMPT = "Your endpoint directory: /e\n"


# -- a plain client --------------------------------------------------------------------


@dataclass(frozen=True)
class Answered:
    status: int
    headers: dict[str, str]
    body: bytes
    complete: bool  # False: the connection closed before the whole body arrived


def post(
    port: int, path: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> Answered:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        payload = json.dumps(body).encode()
        connection.request(
            "POST", path, payload, {"Content-Type": "application/json", **(headers or {})}
        )
        response = connection.getresponse()
        received = {k.lower(): v for k, v in response.getheaders()}
        try:
            return Answered(response.status, received, response.read(), True)
        except http.client.IncompleteRead as broken:
            return Answered(response.status, received, broken.partial, False)
    finally:
        connection.close()


def raw_exchange(port: int, path: str, body: dict[str, Any]) -> bytes:
    """Every byte the server sends for one request, read until it closes the connection."""
    payload = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(head + payload)
        parts: list[bytes] = []
        while chunk := connection.recv(65536):
            parts.append(chunk)
    return b"".join(parts)


def sse_events(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """Parse a whole server-sent event stream strictly: each event a name and JSON data."""
    text = data.decode()
    assert text.endswith("\n\n")
    events = []
    for block in text.split("\n\n")[:-1]:
        name_line, data_line = block.split("\n")
        assert name_line.startswith("event: ") and data_line.startswith("data: ")
        name = name_line.removeprefix("event: ")
        event = json.loads(data_line.removeprefix("data: "))
        assert event["type"] == name
        events.append((name, event))
    return events


def whole_events(data: bytes) -> tuple[list[tuple[str, dict[str, Any]]], bytes]:
    """The whole events of a broken stream, and the bytes of the one broken off."""
    cut = data.rfind(b"\n\n") + 2
    return (sse_events(data[:cut]) if cut > 1 else []), data[cut:]


# -- reading usage as a meter would --------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """The usage one answer reported, read from its own fields."""

    model: str
    input_tokens: int
    output_tokens: int
    cache_read: int
    cache_write: int
    reasoning: int
    web_searches: int


def anthropic_seen(usage: dict[str, Any], model: str) -> Seen:
    return Seen(
        model,
        usage["input_tokens"],
        usage["output_tokens"],
        usage["cache_read_input_tokens"],
        usage["cache_creation_input_tokens"],
        0,
        (usage.get("server_tool_use") or {}).get("web_search_requests", 0),
    )


def anthropic_stream_seen(events: list[tuple[str, dict[str, Any]]]) -> Seen:
    """`message_start` gives the input and cache figures; `message_delta`'s figures are
    cumulative and replace them."""
    (start,) = [e for n, e in events if n == "message_start"]
    usage = dict(start["message"]["usage"])
    assert usage["output_tokens"] == 1
    for name, event in events:
        if name == "message_delta":
            usage.update(event["usage"])
    return anthropic_seen(usage, start["message"]["model"])


def openai_seen(response: dict[str, Any]) -> Seen:
    usage = response["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert usage["input_tokens_details"]["cached_tokens"] <= usage["input_tokens"]
    assert usage["output_tokens_details"]["reasoning_tokens"] <= usage["output_tokens"]
    return Seen(
        response["model"],
        usage["input_tokens"],
        usage["output_tokens"],
        usage["input_tokens_details"]["cached_tokens"],
        0,
        usage["output_tokens_details"]["reasoning_tokens"],
        sum(1 for item in response["output"] if item["type"] == "web_search_call"),
    )


def openai_stream_seen(events: list[tuple[str, dict[str, Any]]]) -> Seen:
    assert [e["sequence_number"] for _, e in events] == list(range(len(events)))
    (completed,) = [e["response"] for n, e in events if n == "response.completed"]
    done = [e["item"] for n, e in events if n == "response.output_item.done"]
    assert completed["output"] == done
    for name, event in events:
        if name in ("response.created", "response.in_progress"):
            assert event["response"]["model"] == completed["model"]
            assert event["response"]["usage"] is None
    return openai_seen(completed)


def totals(seen: list[Seen]) -> LedgerTotals:
    """What the ledger should say of `seen`, summed here."""

    def add(into: UsageTotals, one: Seen) -> UsageTotals:
        return UsageTotals(
            into.requests + 1,
            into.input_tokens + one.input_tokens,
            into.output_tokens + one.output_tokens,
            into.cache_read_tokens + one.cache_read,
            into.cache_write_tokens + one.cache_write,
            into.reasoning_tokens + one.reasoning,
            into.server_tool_uses + one.web_searches,
        )

    overall = UsageTotals()
    by_model: dict[str, UsageTotals] = {}
    for one in seen:
        overall = add(overall, one)
        by_model[one.model] = add(by_model.get(one.model, UsageTotals()), one)
    return LedgerTotals(overall, by_model)


# -- requests --------------------------------------------------------------------------

BASH_TOOL = {
    "name": "Bash",
    "description": "run a command",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}, "description": {"type": "string"}},
        "required": ["command"],
    },
}
EXEC_COMMAND_TOOL = {
    "type": "function",
    "name": "exec_command",
    "parameters": {
        "type": "object",
        "properties": {"cmd": {"type": "string"}, "yield_time_ms": {"type": "number"}},
    },
}


def messages_request(*, stream: bool = True, tools: bool = True, model: str = "m-1") -> Any:
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": 1000,
        "stream": stream,
        "messages": [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}],
    }
    if tools:
        body["tools"] = [BASH_TOOL]
    return body


def responses_request(*, stream: bool = True, tools: bool = True, model: str = "m-1") -> Any:
    body: dict[str, Any] = {
        "model": model,
        "stream": stream,
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": PROMPT}]}
        ],
    }
    if tools:
        body["tools"] = [EXEC_COMMAND_TOOL]
    return body


def prompt_tokens(body: dict[str, Any]) -> int:
    return max(1, len(json.dumps(body).encode()) // 4)


def two_in_three(number: int) -> int:
    return 0 if number % 3 == 1 else 64 * number + 3


def even_only(number: int) -> int:
    return 0 if number % 2 else 512 * number + 5


@pytest.fixture
def anthropic() -> Iterator[AnthropicStandIn]:
    with AnthropicStandIn(FAST) as server:
        assert isinstance(server, AnthropicStandIn)
        yield server


@pytest.fixture
def openai() -> Iterator[OpenAIStandIn]:
    with OpenAIStandIn(FAST) as server:
        assert isinstance(server, OpenAIStandIn)
        yield server


def anthropic_blocks(events: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The content blocks a stream builds up, as the non-streamed message would hold them."""
    blocks: list[dict[str, Any]] = []
    partial: list[str] = []
    for name, event in events:
        if name == "content_block_start":
            blocks.append(dict(event["content_block"]))
            partial = []
        elif name == "content_block_delta":
            delta = event["delta"]
            if delta["type"] == "text_delta":
                blocks[-1]["text"] += delta["text"]
            else:
                partial.append(delta["partial_json"])
        elif name == "content_block_stop" and blocks[-1]["type"] == "tool_use":
            blocks[-1]["input"] = json.loads("".join(partial))
    return blocks


# -- usage -----------------------------------------------------------------------------


def test_anthropic_usage_varies_per_request_and_the_ledger_sums_it(
    anthropic: AnthropicStandIn,
) -> None:
    seen: list[Seen] = []
    for number in range(1, 8):
        body = messages_request(stream=number != 4, tools=number != 5)
        answer = post(anthropic.port, "/v1/messages?beta=true", body)
        assert answer.status == 200 and answer.complete
        if body["stream"]:
            events = sse_events(answer.body)
            one = anthropic_stream_seen(events)
            blocks = anthropic_blocks(events)
            assert "server_tool_use" not in events[0][1]["message"]["usage"]
        else:
            message = json.loads(answer.body)
            one = anthropic_seen(message["usage"], message["model"])
            blocks = message["content"]
        assert one == Seen(
            "m-1",
            prompt_tokens(body) + number,
            max(1, len(json.dumps(blocks)) // 4) + number,
            even_only(number),
            two_in_three(number),
            0,
            0,
        )
        seen.append(one)
        # count_tokens is no generation: an estimate of input_tokens only, not metered
        count = post(anthropic.port, "/v1/messages/count_tokens", body)
        assert count.status == 200 and json.loads(count.body) == {
            "input_tokens": prompt_tokens(body)
        }

    assert {s.cache_read > 0 for s in seen} == {s.cache_write > 0 for s in seen} == {True, False}
    assert anthropic.usage_totals() == totals(seen)
    assert anthropic.usage_totals(include_cut=True) == totals(seen)
    ledger = anthropic.ledger()
    assert (
        [e.number for e in ledger] == list(range(1, 8)) == [e.number for e in anthropic.answered()]
    )
    assert [e.stream for e in ledger] == [n != 4 for n in range(1, 8)]
    assert {(e.requested_model, e.model, e.status, e.outcome) for e in ledger} == {
        ("m-1", "m-1", 200, "answered")
    }
    assert anthropic.generation_requests == 7
    assert anthropic.error_answers() == anthropic.cut_answers() == []
    assert len(anthropic.requests()) == 14  # count_tokens is recorded, not in the ledger


def test_anthropic_can_repeat_the_cumulative_figures_in_message_delta() -> None:
    with AnthropicStandIn(FAST, delta_repeats_usage=True, web_search_requests=1) as server:
        seen = []
        for _ in range(3):
            events = sse_events(post(server.port, "/v1/messages", messages_request()).body)
            start = events[0][1]["message"]["usage"]
            (delta,) = [e["usage"] for n, e in events if n == "message_delta"]
            for name in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
                assert delta[name] == start[name]
            assert delta["server_tool_use"] == {"web_search_requests": 1}
            seen.append(anthropic_stream_seen(events))
        # the figures replace, never add: the ledger counts each once
        assert server.usage_totals() == totals(seen)
        assert server.usage_totals().overall.input_tokens == sum(s.input_tokens for s in seen)


def test_openai_usage_varies_per_request_and_the_ledger_sums_it(openai: OpenAIStandIn) -> None:
    seen: list[Seen] = []
    for number in range(1, 8):
        body = responses_request(stream=number != 3, tools=number != 6)
        answer = post(openai.port, "/v1/responses", body)
        assert answer.status == 200 and answer.complete
        if body["stream"]:
            events = sse_events(answer.body)
            one = openai_stream_seen(events)
            (completed,) = [e["response"] for n, e in events if n == "response.completed"]
        else:
            completed = json.loads(answer.body)
            one = openai_seen(completed)
        (item,) = completed["output"]
        cached, reasoning = even_only(number), two_in_three(number)
        assert one == Seen(
            "m-1",
            prompt_tokens(body) + number + cached,
            max(1, len(json.dumps(item)) // 4) + number + reasoning,
            cached,
            0,
            reasoning,
            0,
        )
        seen.append(one)
    assert {s.cache_read > 0 for s in seen} == {s.reasoning > 0 for s in seen} == {True, False}
    assert openai.usage_totals() == totals(seen)
    assert [(e.number, e.stream) for e in openai.answered()] == [(n, n != 3) for n in range(1, 8)]


# -- the answering model ---------------------------------------------------------------


def test_anthropic_answers_as_another_model(anthropic: AnthropicStandIn) -> None:
    seen = [
        anthropic_stream_seen(
            sse_events(post(anthropic.port, "/v1/messages", messages_request()).body)
        )
    ]
    anthropic.answer_model = "claude-other"
    events = sse_events(post(anthropic.port, "/v1/messages", messages_request()).body)
    assert events[0][1]["message"]["model"] == "claude-other"
    seen.append(anthropic_stream_seen(events))
    message = json.loads(post(anthropic.port, "/v1/messages", messages_request(stream=False)).body)
    assert message["model"] == "claude-other"
    seen.append(anthropic_seen(message["usage"], message["model"]))

    result = anthropic.usage_totals()
    assert result == totals(seen)
    assert set(result.by_model) == {"m-1", "claude-other"}
    assert result.by_model["claude-other"].requests == 2
    ledger = anthropic.ledger()
    assert [(e.requested_model, e.model) for e in ledger] == [
        ("m-1", "m-1"),
        ("m-1", "claude-other"),
        ("m-1", "claude-other"),
    ]
    assert "answered-as=claude-other" in anthropic.requests()[-1].summary


def test_openai_answers_as_another_model() -> None:
    with OpenAIStandIn(FAST, answer_model="gpt-other") as server:
        events = sse_events(post(server.port, "/v1/responses", responses_request()).body)
        models = {e["response"]["model"] for _, e in events if "response" in e}
        assert models == {"gpt-other"}
        seen = [openai_stream_seen(events)]
        document = json.loads(
            post(server.port, "/v1/responses", responses_request(stream=False)).body
        )
        assert document["model"] == "gpt-other"
        seen.append(openai_seen(document))
        server.answer_model = None  # echo the requested model again
        events = sse_events(post(server.port, "/v1/responses", responses_request(model="m-2")).body)
        seen.append(openai_stream_seen(events))
        assert seen[-1].model == "m-2"
        assert server.usage_totals() == totals(seen)
        assert set(server.usage_totals().by_model) == {"gpt-other", "m-2"}


# -- faults ----------------------------------------------------------------------------

Provider = tuple[type[ScriptedStandIn], str, Any]
PROVIDERS: list[Provider] = [
    (AnthropicStandIn, "/v1/messages", messages_request),
    (OpenAIStandIn, "/v1/responses", responses_request),
]
IDS = ["anthropic", "openai"]


def check_error_shape(server: ScriptedStandIn, answer: Answered, kind: str) -> None:
    document = json.loads(answer.body)
    assert answer.headers["content-type"] == "application/json"
    if isinstance(server, AnthropicStandIn):
        assert document["type"] == "error" and document["error"]["type"] == kind
        assert document["error"]["message"]
    else:
        assert document["error"]["type"] == kind and document["error"]["message"]


@pytest.mark.parametrize(("provider", "path", "request_body"), PROVIDERS, ids=IDS)
def test_the_first_requests_are_rate_limited(
    provider: type[ScriptedStandIn], path: str, request_body: Any
) -> None:
    with provider(FAST) as server:
        assert isinstance(server, ScriptedStandIn)
        server.rate_limit(2, retry_after_s=3)
        kind = "rate_limit_error" if provider is AnthropicStandIn else "rate_limit_exceeded"
        for _ in range(2):
            answer = post(server.port, path, request_body())
            assert answer.status == 429 and answer.headers["retry-after"] == "3"
            check_error_shape(server, answer, kind)
        answer = post(server.port, path, request_body())
        assert answer.status == 200
        events = sse_events(answer.body)
        seen = (
            anthropic_stream_seen(events)
            if provider is AnthropicStandIn
            else openai_stream_seen(events)
        )
        assert seen.cache_read == 0 and (seen.cache_write or seen.reasoning) == 64 * 3 + 3
        errors = server.error_answers()
        assert [(e.number, e.status, e.usage, e.model) for e in errors] == [
            (1, 429, None, None),
            (2, 429, None, None),
        ]
        assert [e.number for e in server.answered()] == [3]
        assert server.usage_totals() == totals([seen])
        assert [r.status for r in server.requests()] == [429, 429, 200]


@pytest.mark.parametrize(("provider", "path", "request_body"), PROVIDERS, ids=IDS)
def test_overloaded_for_a_while_then_until_told(
    provider: type[ScriptedStandIn], path: str, request_body: Any
) -> None:
    status = 529 if provider is AnthropicStandIn else 503
    kind = "overloaded_error" if provider is AnthropicStandIn else "server_error"
    with provider(FAST) as server:
        assert isinstance(server, ScriptedStandIn)
        server.rate_limit(1)  # overload comes first; the rate limit waits its turn
        server.overload(0.4)
        began = time.monotonic()
        answer = post(server.port, path, request_body(stream=False))
        assert answer.status == status and "retry-after" not in answer.headers
        check_error_shape(server, answer, kind)
        while time.monotonic() - began < 0.45:
            time.sleep(0.05)
        assert post(server.port, path, request_body()).status == 429
        assert post(server.port, path, request_body()).status == 200

        server.overload(retry_after_s=2)
        for _ in range(3):
            answer = post(server.port, path, request_body())
            assert answer.status == status and answer.headers["retry-after"] == "2"
        if provider is AnthropicStandIn:  # count_tokens is no generation: never refused
            assert post(server.port, "/v1/messages/count_tokens", request_body()).status == 200
        server.end_overload()
        assert post(server.port, path, request_body()).status == 200
        assert [e.status for e in server.ledger()] == [
            status,
            429,
            200,
            status,
            status,
            status,
            200,
        ]
        assert [e.number for e in server.answered()] == [3, 7]


def test_an_anthropic_stream_is_cut_in_its_final_usage_event(anthropic: AnthropicStandIn) -> None:
    anthropic.cut_stream(2)
    first = post(anthropic.port, "/v1/messages", messages_request())
    assert first.complete
    seen = [anthropic_stream_seen(sse_events(first.body))]

    broken = post(anthropic.port, "/v1/messages", messages_request())
    assert broken.status == 200 and not broken.complete
    events, rest = whole_events(broken.body)
    assert [n for n, _ in events][-1] == "content_block_stop"
    assert rest and rest.startswith(b"event: message_delta\n") and not rest.endswith(b"\n\n")
    (entry,) = anthropic.cut_answers()
    start = events[0][1]["message"]["usage"]
    # what reached the client: message_start's figures, its output_tokens 1
    assert entry.number == 2 and entry.outcome == "cut" and entry.usage is not None
    assert entry.usage.output_tokens == 1
    assert (entry.usage.input_tokens, entry.usage.cache_read_tokens) == (
        start["input_tokens"],
        start["cache_read_input_tokens"],
    )
    assert entry.usage.cache_write_tokens == start["cache_creation_input_tokens"] == 131

    third = post(anthropic.port, "/v1/messages", messages_request())
    assert third.complete
    seen.append(anthropic_stream_seen(sse_events(third.body)))
    assert anthropic.usage_totals() == totals(seen)
    with_cut = anthropic.usage_totals(include_cut=True).overall
    assert with_cut.requests == 3
    assert with_cut.input_tokens == totals(seen).overall.input_tokens + start["input_tokens"]
    assert with_cut.output_tokens == totals(seen).overall.output_tokens + 1


def test_a_cut_stream_ends_without_the_final_chunk(openai: OpenAIStandIn) -> None:
    openai.cut_stream(1, event=3, keep_bytes=10)
    data = raw_exchange(openai.port, "/v1/responses", responses_request())
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"Transfer-Encoding: chunked" in head
    chunks: list[bytes] = []
    while body:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line, 16)
        assert size > 0, "the final chunk was sent"
        chunks.append(body[:size])
        assert body[size : size + 2] == b"\r\n"
        body = body[size + 2 :]
    assert len(chunks) == 4
    assert [sse_events(c)[0][0] for c in chunks[:3]] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
    ]
    assert chunks[3] == b"event: res"
    (entry,) = openai.cut_answers()
    assert entry.usage is None  # usage comes only in response.completed
    assert openai.usage_totals(include_cut=True).overall == UsageTotals()


def test_an_openai_stream_is_cut_in_response_completed(openai: OpenAIStandIn) -> None:
    openai.cut_stream(1)
    broken = post(openai.port, "/v1/responses", responses_request())
    assert not broken.complete
    events, rest = whole_events(broken.body)
    assert events[-1][0] == "response.output_item.done"
    assert rest.startswith(b"event: response.completed\n") and not rest.endswith(b"\n\n")
    assert openai.cut_answers()[0].usage is None and openai.usage_totals().overall.requests == 0


@pytest.mark.parametrize(("provider", "path", "request_body"), PROVIDERS, ids=IDS)
def test_a_non_streamed_answer_is_cut_mid_body(
    provider: type[ScriptedStandIn], path: str, request_body: Any
) -> None:
    with provider(FAST) as server:
        assert isinstance(server, ScriptedStandIn)
        server.cut_stream(1)
        broken = post(server.port, path, request_body(stream=False))
        assert broken.status == 200 and not broken.complete
        whole = int(broken.headers["content-length"])
        assert len(broken.body) == whole // 2
        with pytest.raises(ValueError):
            json.loads(broken.body)
        (entry,) = server.cut_answers()
        assert entry.usage is None and not entry.stream
        assert post(server.port, path, request_body(stream=False)).complete


def test_faults_are_counted_exactly_under_concurrency(anthropic: AnthropicStandIn) -> None:
    anthropic.rate_limit(5)
    answers: list[Answered] = []
    lock = threading.Lock()

    def one() -> None:
        answer = post(anthropic.port, "/v1/messages", messages_request())
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=one) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(a.status for a in answers) == [200] * 11 + [429] * 5
    assert [e.number for e in anthropic.ledger()] == list(range(1, 17))
    assert len(anthropic.error_answers()) == 5
    seen = [anthropic_stream_seen(sse_events(a.body)) for a in answers if a.status == 200]
    assert anthropic.usage_totals() == totals(seen)


def test_an_invalid_body_is_an_error_in_the_ledger(openai: OpenAIStandIn) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", openai.port, timeout=5)
    connection.request("POST", "/v1/responses", b"[1, 2]", {"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 400 and "error" in json.loads(response.read())
    connection.close()
    (entry,) = openai.error_answers()
    assert (entry.number, entry.status, entry.requested_model) == (1, 400, None)


# -- web search ------------------------------------------------------------------------


def test_anthropic_reports_web_searches_in_usage(anthropic: AnthropicStandIn) -> None:
    events = sse_events(post(anthropic.port, "/v1/messages", messages_request()).body)
    assert all("server_tool_use" not in json.dumps(e) for _, e in events)  # off by default
    seen = [anthropic_stream_seen(events)]
    anthropic.web_search_requests = 2
    events = sse_events(post(anthropic.port, "/v1/messages", messages_request()).body)
    (delta,) = [e for n, e in events if n == "message_delta"]
    assert delta["usage"]["server_tool_use"] == {"web_search_requests": 2}
    seen.append(anthropic_stream_seen(events))
    message = json.loads(post(anthropic.port, "/v1/messages", messages_request(stream=False)).body)
    assert message["usage"]["server_tool_use"] == {"web_search_requests": 2}
    seen.append(anthropic_seen(message["usage"], message["model"]))
    assert anthropic.usage_totals() == totals(seen)
    assert anthropic.usage_totals().overall.server_tool_uses == 4


def test_openai_reports_web_search_calls_as_output_items(openai: OpenAIStandIn) -> None:
    events = sse_events(post(openai.port, "/v1/responses", responses_request()).body)
    assert all("web_search" not in name for name, _ in events)  # off by default
    seen = [openai_stream_seen(events)]
    openai.web_search_requests = 1
    events = sse_events(post(openai.port, "/v1/responses", responses_request()).body)
    done = [e for n, e in events if n == "response.output_item.done"]
    assert [(e["output_index"], e["item"]["type"]) for e in done] == [
        (0, "web_search_call"),
        (1, "function_call"),
    ]
    assert done[0]["item"]["status"] == "completed"
    assert done[0]["item"]["action"]["type"] == "search"
    search_events = [n for n, e in events if e.get("item_id") == done[0]["item"]["id"]]
    assert search_events == [
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
    ]
    seen.append(openai_stream_seen(events))
    assert seen[-1].web_searches == 1
    document = json.loads(post(openai.port, "/v1/responses", responses_request(stream=False)).body)
    assert [item["type"] for item in document["output"]] == ["web_search_call", "function_call"]
    seen.append(openai_seen(document))
    assert openai.usage_totals() == totals(seen)
    assert openai.usage_totals().overall.server_tool_uses == 2


# -- credentials as received -----------------------------------------------------------


def test_the_credentials_each_request_carried_are_recorded(
    anthropic: AnthropicStandIn, openai: OpenAIStandIn
) -> None:
    post(anthropic.port, "/v1/messages", messages_request(), {"x-api-key": "key-a"})
    post(anthropic.port, "/v1/messages/count_tokens", messages_request(), {"X-Api-Key": "key-b"})
    post(anthropic.port, "/v1/messages", messages_request())
    assert [r.x_api_key for r in anthropic.requests()] == ["key-a", "key-b", None]
    assert {r.authorization for r in anthropic.requests()} == {None}
    post(openai.port, "/v1/responses", responses_request(), {"Authorization": "Bearer key-c"})
    assert [r.authorization for r in openai.requests()] == ["Bearer key-c"]
    assert openai.requests()[0].headers["authorization"] == "Bearer key-c"


def test_a_thinking_stand_in_answers_after_its_think_time_and_faults_at_once() -> None:
    with AnthropicStandIn(FAST, think_s=0.5) as server:
        server.rate_limit(1)
        started = time.monotonic()
        assert post(server.port, "/v1/messages", messages_request()).status == 429
        refused_s = time.monotonic() - started
        answers: list[Answered] = []
        threads = [
            threading.Thread(
                target=lambda: answers.append(post(server.port, "/v1/messages", messages_request()))
            )
            for _ in range(3)
        ]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        answered_s = time.monotonic() - started
    assert [a.status for a in answers] == [200, 200, 200]
    # Each answer waited its think time; the three waited side by side, not in turn, and
    # the refusal did not wait (bounds of what the stand-in does, not of this machine's
    # speed: a loaded machine only makes the answers later).
    assert refused_s < 0.5 <= answered_s
    assert [e.number for e in server.answered()] == [2, 3, 4]


@pytest.mark.parametrize(("provider", "path", "request_body"), PROVIDERS, ids=IDS)
def test_steady_usage_does_not_grow_with_the_request_number(
    provider: type[ScriptedStandIn], path: str, request_body: Any
) -> None:
    with provider(FAST, steady_usage=True) as server:
        seen = []
        for _ in range(6):
            events = sse_events(post(server.port, path, request_body()).body)
            seen.append(
                anthropic_stream_seen(events)
                if provider is AnthropicStandIn
                else openai_stream_seen(events)
            )
    # The same request gets the same figures whatever its number: a hundred agents on one
    # stand-in each see their own request's size, never the others' count.
    assert len({(s.input_tokens, s.cache_read, s.cache_write, s.reasoning) for s in seen}) == 1
    assert max(s.cache_read + s.cache_write + s.reasoning for s in seen) < 16
