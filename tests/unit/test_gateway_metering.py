"""The gateway's meter: what each provider's answer says of itself, read from byte streams
as the providers send them (whole, byte by byte, and split at random), and never
believed beyond what it can be."""

from __future__ import annotations

import gzip
import json
import sys
import tracemalloc
import types
import zlib
from typing import Any

import pytest
from mailroom.orchestrator.gateway import metering
from mailroom.orchestrator.gateway.metering import (
    MAX_EVENT_BYTES,
    MAX_REQUEST_BYTES,
    Metered,
    requested_model,
    response_meter,
)
from metered_streams import SSE, meter_in_pieces, metered


def event(name: str, data: Any, *, crlf: bool = False) -> bytes:
    """One server-sent event as the providers send it: `event:` then `data:`."""
    text = f"event: {name}\ndata: {json.dumps(data)}\n\n"
    return (text.replace("\n", "\r\n") if crlf else text).encode()


def anthropic_stream(
    *,
    model: str = "claude-sonnet-4-5-20250929",
    start_usage: dict[str, Any] | None = None,
    delta_usage: dict[str, Any] | None = None,
    text: str = "Déjà vu: 日本語 🤖",
    stop: bool = True,
    crlf: bool = False,
) -> bytes:
    """A streamed message the way the Messages API sends one (the shapes the project's
    stand-in sends): usage in `message_start` (output 1) and `message_delta`."""
    usage = start_usage or {
        "input_tokens": 1200,
        "cache_creation_input_tokens": 300,
        "cache_read_input_tokens": 4000,
        "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200},
        "output_tokens": 1,
        "service_tier": "standard",
    }
    events = [
        event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
            },
            crlf=crlf,
        ),
        event("ping", {"type": "ping"}, crlf=crlf),
        event(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
            crlf=crlf,
        ),
        event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            },
            crlf=crlf,
        ),
        event("content_block_stop", {"type": "content_block_stop", "index": 0}, crlf=crlf),
        event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": delta_usage if delta_usage is not None else {"output_tokens": 87},
            },
            crlf=crlf,
        ),
    ]
    if stop:
        events.append(event("message_stop", {"type": "message_stop"}, crlf=crlf))
    return b"".join(events)


def web_search(item_id: str | None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": "q"},
    }
    if item_id is not None:
        item["id"] = item_id
    return item


def openai_response(
    status: str = "completed",
    output: list[dict[str, Any]] | None = None,
    usage: Any = "default",
    **fields: Any,
) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "status": status,
        "error": None,
        "incomplete_details": None,
        "model": "gpt-5-codex",
        "output": output if output is not None else [],
        "service_tier": "default",
        "usage": {
            "input_tokens": 9000,
            "input_tokens_details": {"cached_tokens": 6000},
            "output_tokens": 700,
            "output_tokens_details": {"reasoning_tokens": 500},
            "total_tokens": 9700,
        }
        if usage == "default"
        else usage,
        **fields,
    }


def openai_stream(
    final: dict[str, Any], *, final_event: str | None = "response.completed"
) -> bytes:
    """A streamed response the way the Responses API sends one: created, in progress,
    each output item added and done, then the final event with the whole response."""
    pending = {**final, "status": "in_progress", "output": [], "usage": None}
    chunks = [
        event("response.created", {"type": "response.created", "response": pending}),
        event("response.in_progress", {"type": "response.in_progress", "response": pending}),
    ]
    for index, item in enumerate(final["output"]):
        added = {"type": "response.output_item.added", "output_index": index, "item": item}
        done = {"type": "response.output_item.done", "output_index": index, "item": item}
        chunks += [event(added["type"], added), event(done["type"], done)]
    if final_event is not None:
        chunks.append(event(final_event, {"type": final_event, "response": final}))
    return b"".join(chunks) + b"data: [DONE]\n\n"


ANSWER = {
    "id": "msg_9",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "ünïcode ✓", "annotations": []}],
}


# Anthropic


def test_an_anthropic_stream_says_its_model_tokens_and_caches() -> None:
    assert metered("anthropic", anthropic_stream()) == Metered(
        model="claude-sonnet-4-5-20250929",
        input_tokens=1200,
        output_tokens=87,
        cache_read_tokens=4000,
        cache_write_tokens=300,
        cache_write_1h_tokens=200,
        service_tier="standard",
        complete=True,
    )


def test_message_delta_usage_is_cumulative_and_overrides_what_message_start_said() -> None:
    body = anthropic_stream(
        delta_usage={
            "input_tokens": 1250,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 4100,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
            "output_tokens": 90,
            "server_tool_use": {"web_search_requests": 3, "web_fetch_requests": 1},
        }
    )
    result = metered("anthropic", body)
    assert (result.input_tokens, result.output_tokens) == (1250, 90)
    assert (result.cache_read_tokens, result.cache_write_tokens) == (4100, 0)
    assert result.cache_write_1h_tokens == 0
    assert (result.web_search_requests, result.server_tool_uses) == (3, 4)
    assert result.complete and result.service_tier == "standard"


def test_a_null_in_message_delta_leaves_what_message_start_said() -> None:
    body = anthropic_stream(
        delta_usage={"input_tokens": None, "cache_read_input_tokens": None, "output_tokens": 12}
    )
    result = metered("anthropic", body)
    assert (result.input_tokens, result.cache_read_tokens, result.output_tokens) == (1200, 4000, 12)


def test_a_stream_without_its_final_event_is_incomplete_with_what_was_seen() -> None:
    result = metered("anthropic", anthropic_stream(stop=False))
    assert not result.complete
    assert (result.input_tokens, result.output_tokens) == (1200, 87)
    # Cut inside the final event: an unfinished event is discarded, as a client does.
    cut = anthropic_stream()[:-5]
    assert not metered("anthropic", cut).complete
    # Cut before message_delta: only message_start's figures (output 1) are known.
    early = anthropic_stream().split(b"event: content_block_start")[0]
    result = metered("anthropic", early)
    assert (result.output_tokens, result.complete) == (1, False)


def test_an_error_event_mid_stream_is_reported_by_its_type() -> None:
    body = anthropic_stream(stop=False).split(b"event: message_delta")[0] + event(
        "error",
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )
    result = metered("anthropic", body)
    assert result.error == "overloaded_error" and not result.complete
    assert result.input_tokens == 1200
    unnamed = event("error", {"type": "error", "error": {"message": "x"}})
    assert metered("anthropic", unnamed).error == "error"


def test_an_unstreamed_anthropic_message_and_an_error_body() -> None:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5-20251001",
        "content": [{"type": "text", "text": "hello"}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 10,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 5,
            "server_tool_use": {"web_search_requests": 1},
            "service_tier": "priority",
        },
    }
    body = json.dumps(message).encode()
    result = metered("anthropic", body, content_type="application/json")
    assert result == Metered(
        model="claude-haiku-4-5-20251001",
        input_tokens=10,
        output_tokens=5,
        cache_read_tokens=0,
        cache_write_tokens=0,
        server_tool_uses=1,
        web_search_requests=1,
        service_tier="priority",
        complete=True,
    )
    error = json.dumps({"type": "error", "error": {"type": "rate_limit_error", "message": "x"}})
    for status in (429, 529, 400):
        assert metered(
            "anthropic", error.encode(), content_type="application/json", status=status
        ) == Metered(error="rate_limit_error")
    # An error status never yields usage, even from a body that looks like a message.
    assert metered("anthropic", body, content_type="application/json", status=500) == Metered(
        error="error"
    )
    # Nor does an error body sent as an event stream.
    assert metered("anthropic", error.encode(), status=503).error == "rate_limit_error"
    # A body that is not JSON says nothing; an error type in a 200 body is reported.
    assert metered("anthropic", b"<html>bad gateway</html>", status=502) == Metered()
    assert metered("anthropic", error.encode(), content_type="application/json").error == (
        "rate_limit_error"
    )


def test_crlf_and_cr_framing_and_comments() -> None:
    expected = metered("anthropic", anthropic_stream())
    assert metered("anthropic", anthropic_stream(crlf=True)) == expected
    cr_only = anthropic_stream().replace(b"\n", b"\r")
    assert metered("anthropic", cr_only) == expected
    # Keep-alive comments, fields without a space after the colon, unknown fields.
    noisy = b": keep-alive\n\nid: 7\nretry: 100\n" + anthropic_stream().replace(b"data: ", b"data:")
    assert metered("anthropic", noisy) == expected
    # A CRLF split between two chunks is one line end, not two.
    body = anthropic_stream(crlf=True)
    at = body.index(b"\r\n\r\n") + 1
    assert meter_in_pieces("anthropic", body, [body[:at], body[at:]], SSE, 200) == expected


def test_data_split_over_several_lines_is_joined() -> None:
    data = json.dumps({"type": "message_delta", "usage": {"output_tokens": 33}}, indent=1)
    lines = "".join(f"data: {line}\n" for line in data.splitlines())
    body = anthropic_stream(stop=False).split(b"event: message_delta")[0]
    body += f"event: message_delta\n{lines}\n".encode() + event(
        "message_stop", {"type": "message_stop"}
    )
    result = metered("anthropic", body)
    assert result.output_tokens == 33 and result.complete


# OpenAI


def test_an_openai_stream_says_its_model_tokens_and_cached_input() -> None:
    final = openai_response(output=[ANSWER])
    assert metered("openai_responses", openai_stream(final)) == Metered(
        model="gpt-5-codex",
        input_tokens=9000,
        output_tokens=700,
        cache_read_tokens=6000,
        cache_write_tokens=None,  # the Responses API reports no cache writes
        server_tool_uses=0,
        web_search_requests=0,
        service_tier="default",
        complete=True,
    )


def test_each_web_search_counts_once_whether_seen_done_or_in_the_final_output() -> None:
    final = openai_response(output=[web_search("ws_1"), web_search("ws_2"), ANSWER])
    result = metered("openai_responses", openai_stream(final))
    assert (result.server_tool_uses, result.web_search_requests) == (2, 2)
    # Items without ids are known by their place in the output.
    anonymous = openai_response(output=[web_search(None), ANSWER, web_search(None)])
    result = metered("openai_responses", openai_stream(anonymous))
    assert (result.server_tool_uses, result.web_search_requests) == (2, 2)
    # Other hosted tools count as server tool uses, not as searches; client tools do not.
    tools = [
        {"id": "fs_1", "type": "file_search_call"},
        {"id": "fc_1", "type": "function_call", "name": "shell", "arguments": "{}"},
        web_search("ws_1"),
    ]
    result = metered("openai_responses", openai_stream(openai_response(output=tools)))
    assert (result.server_tool_uses, result.web_search_requests) == (2, 1)
    # Cut before the final event: the searches seen done so far.
    cut = openai_stream(final, final_event=None)
    result = metered("openai_responses", cut)
    assert (result.web_search_requests, result.complete, result.input_tokens) == (2, False, None)
    assert result.model == "gpt-5-codex"


def test_tracked_output_items_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metering, "MAX_TRACKED_ITEMS", 3)
    final = openai_response(output=[web_search(f"ws_{i}") for i in range(5)])
    result = metered("openai_responses", openai_stream(final))
    assert (result.server_tool_uses, result.web_search_requests) == (None, None)


def test_failed_and_incomplete_responses_are_complete_with_their_error() -> None:
    failed = openai_response(
        "failed", usage=None, error={"code": "server_error", "message": "The server failed"}
    )
    result = metered("openai_responses", openai_stream(failed, final_event="response.failed"))
    assert result.complete and result.error == "server_error" and result.input_tokens is None
    incomplete = openai_response(
        "incomplete", output=[ANSWER], incomplete_details={"reason": "max_output_tokens"}
    )
    stream = openai_stream(incomplete, final_event="response.incomplete")
    result = metered("openai_responses", stream)
    assert result.complete and result.error == "incomplete: max_output_tokens"
    assert (result.input_tokens, result.output_tokens) == (9000, 700)


def test_openai_error_events() -> None:
    begun = openai_stream(openai_response(), final_event=None)
    for data, expected in (
        (
            {"type": "error", "code": "rate_limit_exceeded", "message": "slow down"},
            "rate_limit_exceeded",
        ),
        ({"type": "error", "error": {"type": "server_error", "code": "x"}}, "server_error"),
        ({"type": "error", "message": "no code"}, "error"),
    ):
        result = metered("openai_responses", begun + event("error", data))
        assert result.error == expected and not result.complete


def test_an_unstreamed_openai_response_and_error_bodies() -> None:
    document = openai_response(output=[web_search("ws_1"), ANSWER])
    body = json.dumps(document).encode()
    result = metered("openai_responses", body, content_type="application/json")
    assert result == Metered(
        model="gpt-5-codex",
        input_tokens=9000,
        output_tokens=700,
        cache_read_tokens=6000,
        server_tool_uses=1,
        web_search_requests=1,
        service_tier="default",
        complete=True,
    )
    error = {"error": {"message": "m", "type": "invalid_request_error", "param": None, "code": "c"}}
    result = metered(
        "openai_responses", json.dumps(error).encode(), content_type="application/json", status=400
    )
    assert result == Metered(error="invalid_request_error")
    # A 200 that is not a finished response (a model listing) is not complete.
    listing = json.dumps({"object": "list", "data": []}).encode()
    assert not metered("openai_responses", listing, content_type="application/json").complete


# Hostile answers


@pytest.mark.parametrize(
    "value",
    [-1, "1200", 12.0, 1e3, True, False, 10**16, [1], {"n": 1}],
    ids=repr,
)
def test_a_count_that_is_not_a_non_negative_int_is_not_said(value: Any) -> None:
    start = {
        "input_tokens": value,
        "cache_creation_input_tokens": value,
        "cache_read_input_tokens": value,
        "cache_creation": {"ephemeral_1h_input_tokens": value},
        "output_tokens": value,
    }
    delta = {"output_tokens": value, "server_tool_use": {"web_search_requests": value}}
    result = metered("anthropic", anthropic_stream(start_usage=start, delta_usage=delta))
    assert result.complete
    assert result.input_tokens is None and result.output_tokens is None
    assert result.cache_read_tokens is None and result.cache_write_tokens is None
    assert result.cache_write_1h_tokens is None
    assert result.server_tool_uses is None and result.web_search_requests is None
    final = openai_response(
        usage={
            "input_tokens": value,
            "input_tokens_details": {"cached_tokens": value},
            "output_tokens": value,
        }
    )
    result = metered("openai_responses", openai_stream(final))
    assert (result.input_tokens, result.cache_read_tokens, result.output_tokens) == (None,) * 3


def test_an_unreadable_later_value_makes_the_count_unknown() -> None:
    result = metered("anthropic", anthropic_stream(delta_usage={"input_tokens": "many"}))
    assert result.input_tokens is None and result.output_tokens == 1
    result = metered("anthropic", anthropic_stream(delta_usage="lots"))  # type: ignore[arg-type]
    assert (result.input_tokens, result.output_tokens, result.cache_read_tokens) == (None,) * 3


def test_nan_infinity_and_oversized_numbers() -> None:
    start = b'{"type":"message_start","message":{"model":"m","usage":{"input_tokens":NaN,'
    start += b'"output_tokens":Infinity,"cache_read_input_tokens":-Infinity,'
    start += b'"cache_creation_input_tokens":' + b"9" * 5000 + b"}}}"
    body = b"event: message_start\ndata: " + start + b"\n\n"
    body += event("message_stop", {"type": "message_stop"})
    result = metered("anthropic", body)
    # The 5000-digit number is past what JSON decoding accepts: the event says nothing.
    assert result == Metered(complete=True)
    start = start.replace(b"9" * 5000, b"1e400")
    body = b"event: message_start\ndata: " + start + b"\n\n"
    result = metered("anthropic", body)
    assert result.model == "m"
    assert (result.input_tokens, result.output_tokens, result.cache_write_tokens) == (None,) * 3


def test_names_must_be_short_strings() -> None:
    for model in ("x" * 201, 42, ["claude"], "", None):
        result = metered("anthropic", anthropic_stream(model=model))  # type: ignore[arg-type]
        assert result.model is None and result.input_tokens == 1200
    assert metered("anthropic", anthropic_stream(model="x" * 200)).model == "x" * 200
    long_error = event("error", {"type": "error", "error": {"type": "e" * 500}})
    assert metered("anthropic", long_error).error == "error"


def test_deeply_nested_and_misshapen_events_say_nothing() -> None:
    nested = b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n\n"
    misshapen = [
        nested,
        b"data: [1, 2, 3]\n\n",
        b'data: "message_stop"\n\n',
        b"data: \xff\xfe not utf-8\n\n",
        event("message_start", {"type": "message_start", "message": "claude"}),
        event("message_start", {"type": "message_start", "message": {"usage": None}}),
        b'data: {"type": 7, "message": {"model": "m"}}\n\n',  # no name for it
        event("response.completed", {"type": "response.completed", "response": {"usage": 1}}),
    ]
    for body in misshapen:
        assert metered("anthropic", body) == Metered(), body[:40]
    # An event's `type` in its data names it; without one, its `event:` field does.
    named = b"event: message_stop\ndata: {}\n\n"
    assert metered("anthropic", named).complete
    unknown_openai = event("response.completed", {"type": "response.completed", "response": [1]})
    assert metered("openai_responses", unknown_openai) == Metered(complete=True)


# Bounds


def test_an_oversized_event_is_passed_over_in_bounded_memory() -> None:
    chunk = b"x" * (1 << 20)
    head = anthropic_stream(stop=False).split(b"event: message_delta")[0]
    tail = event("message_delta", {"type": "message_delta", "usage": {"output_tokens": 99}})
    tail += event("message_stop", {"type": "message_stop"})
    meter = response_meter("anthropic", SSE, 200)
    meter.feed(head)
    tracemalloc.start()
    try:
        meter.feed(b"event: content_block_delta\ndata: ")
        for _ in range(MAX_EVENT_BYTES // len(chunk) + 8):  # 40 MiB of one data line
            meter.feed(chunk)
        meter.feed(b"\n\n")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    meter.feed(tail)
    result = meter.finish()
    # Held up to the cap, never past it; the stream goes on being read after it.
    assert peak < MAX_EVENT_BYTES + (4 << 20)
    assert result.skipped == 1 and result.output_tokens == 99
    # A content event carries no usage: the stream is still complete.
    assert result.complete


def test_a_passed_over_event_that_could_carry_usage_leaves_the_stream_incomplete(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(metering, "MAX_EVENT_BYTES", 4096)
    padding = "p" * 5000
    head = anthropic_stream(stop=False).split(b"event: content_block_start")[0]
    stop = event("message_stop", {"type": "message_stop"})
    big_delta = event(
        "message_delta",
        {"type": "message_delta", "usage": {"output_tokens": 50}, "padding": padding},
    )
    result = metered("anthropic", head + big_delta + stop)
    assert result.skipped == 1 and not result.complete and result.output_tokens == 1
    unnamed = b"data: " + json.dumps({"type": "ping", "padding": padding}).encode() + b"\n\n"
    assert not metered("anthropic", head + unnamed + stop).complete
    # A line long enough to pass the cap before its own end, under any `event:` name.
    big_text = event(
        "content_block_delta",
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": padding}},
    )
    result = metered("anthropic", head + big_text + stop)
    assert result.skipped == 1 and result.complete
    # The final OpenAI event passed over: its usage is unknown.
    final = openai_response(output=[ANSWER])
    padded = {"type": "response.completed", "response": {**final, "padding": padding}}
    stream = openai_stream(final, final_event=None) + event("response.completed", padded)
    result = metered("openai_responses", stream)
    assert result.skipped == 1 and not result.complete and result.input_tokens is None
    assert result.model == "gpt-5-codex"


def test_a_json_body_past_the_cap_leaves_its_usage_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metering, "MAX_BODY_BYTES", 1000)
    body = json.dumps(openai_response(output=[ANSWER], padding="p" * 2000)).encode()
    result = metered("openai_responses", body, content_type="application/json")
    assert result == Metered(skipped=1)


def test_finish_is_final() -> None:
    meter = response_meter("anthropic", SSE, 200)
    meter.feed(anthropic_stream())
    first = meter.finish()
    meter.feed(b"event: error\ndata: {}\n\n")
    assert meter.finish() == first and first.complete and first.error is None


# The model a request asks for


def test_requested_model_from_plain_and_compressed_bodies() -> None:
    body = json.dumps({"model": "claude-opus-4-8", "messages": [{"content": "é"}]}).encode()
    assert requested_model(body, None) == "claude-opus-4-8"
    assert requested_model(body, "identity") == "claude-opus-4-8"
    assert requested_model(gzip.compress(body), "gzip") == "claude-opus-4-8"
    assert requested_model(gzip.compress(body), "x-gzip") == "claude-opus-4-8"
    assert requested_model(gzip.compress(body), "GZIP, identity") == "claude-opus-4-8"
    assert requested_model(zlib.compress(body), "deflate") == "claude-opus-4-8"
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    assert requested_model(raw.compress(body) + raw.flush(), "deflate") == "claude-opus-4-8"
    # Codings apply in order; undone last first.
    twice = gzip.compress(zlib.compress(body))
    assert requested_model(twice, "deflate, gzip") == "claude-opus-4-8"
    assert requested_model(twice, "gzip, deflate") is None


@pytest.mark.parametrize(
    ("body", "encoding"),
    [
        (b"not json", None),
        (b'["model"]', None),
        (b'{"model": 5}', None),
        (b'{"model": "' + b"m" * 201 + b'"}', None),
        (b'{"model": ""}', None),
        (b"[" * 100_000, None),
        (b"\xff\xfe{}", None),
        (b'{"model": "m"}', "br"),
        (b'{"model": "m"}', "gzip"),
        (gzip.compress(b'{"model": "m"}')[:-6], "gzip"),
        (b"", None),
    ],
    ids=range(11),
)
def test_requested_model_never_raises_on_garbage(body: bytes, encoding: str | None) -> None:
    assert requested_model(body, encoding) is None


def test_requested_model_decompresses_only_so_far() -> None:
    padding = b" " * (MAX_REQUEST_BYTES + 10)
    bomb = gzip.compress(b'{"model": "m",' + padding + b'"x": 1}', compresslevel=9)
    assert len(bomb) < 1 << 20
    assert requested_model(bomb, "gzip") is None
    assert requested_model(b" " * (MAX_REQUEST_BYTES + 1), None) is None


def test_requested_model_reads_zstd_only_where_zstandard_is_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = json.dumps({"model": "gpt-5-codex"}).encode()
    monkeypatch.setitem(sys.modules, "zstandard", None)  # importing it fails
    assert requested_model(b"zstd:" + body, "zstd") is None

    class Reader:
        def __init__(self, data: bytes) -> None:
            if not data.startswith(b"zstd:"):
                raise ValueError("not zstd")
            self._rest = data[5:]

        def read(self, size: int) -> bytes:
            piece, self._rest = self._rest[:size], self._rest[size:]
            return piece

    class Decompressor:
        def stream_reader(self, data: bytes) -> Reader:
            return Reader(data)

    fake = types.ModuleType("zstandard")
    fake.ZstdDecompressor = Decompressor  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "zstandard", fake)
    assert requested_model(b"zstd:" + body, "zstd") == "gpt-5-codex"
    assert requested_model(body, "zstd") is None


@pytest.mark.parametrize(
    ("body", "model"),
    [
        (b'{"model": "m-1", "messages": [{"role": "user", "content": "x"}]}', "m-1"),
        (b' {\n "messages" : [{"model": "inner"}], "stream": true , "model":"m-2"}', "m-2"),
        (b'{"messages": "\\"model\\": \\"text\\"", "model": "m-3"}', "m-3"),
        (b'{"messages": []}', None),
        (b"{}", None),
        (b'["model", "m"]', None),
        (b'{"model": "m", ', "m"),  # read no further than the member it needs
        (b'{"messages": [1, 2', None),
        (b'{"model": 7}', None),
    ],
)
def test_the_requested_model_is_the_top_level_member_read_no_further(
    body: bytes, model: str | None
) -> None:
    assert requested_model(body, None) == model
