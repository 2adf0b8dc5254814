"""The provider gateway speaking Google's Gemini API for a third agent CLI: routes with
the model in the path, the key in `x-goog-api-key` (never a token or a `?key=` passed
on), refusals in Google's error shape, and usage metered from `usageMetadata` exactly as
the stand-in reported it, streamed or not."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mailroom.orchestrator.actors.actor_network import ActorNetwork
from mailroom.orchestrator.gateway.metering import Metered, requested_model
from mailroom.orchestrator.gateway.server import EpisodeGate, Gateway
from mailroom.orchestrator.perf.provider_standin.gemini_standin import GeminiStandIn
from mailroom.orchestrator.records.provider import ProviderDeclaration
from mailroom.orchestrator.records.result import ProviderUsage
from metered_streams import metered

KEY = "AIza-real-key-of-the-gemini-test"
TOKEN = "episode-token-of-the-gemini-test"
GEMINI = ProviderDeclaration(
    kind="gemini",
    key_variable="GEMINI_API_KEY",
    base_url_variable="GOOGLE_GEMINI_BASE_URL",
    routes=[
        "POST /v1beta/models/{model}:streamGenerateContent",
        "POST /v1beta/models/{model}:generateContent",
        "POST /v1beta/models/{model}:countTokens",
    ],
)
PROMPT = "Your endpoint directory: /nowhere/at-all\n"
SHELL = {"functionDeclarations": [{"name": "run_shell_command", "parameters": {}}]}


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    served = Gateway()
    yield served
    served.close()


def _open(gateway: Gateway, upstream: str, ledger: Path) -> tuple[EpisodeGate, int]:
    network = ActorNetwork(confined=False)
    port = network.port
    environ = {GEMINI.key_variable: KEY, GEMINI.base_url_variable: upstream}
    gate = gateway.open(
        network.take_listener(), GEMINI, token=TOKEN, ledger_path=ledger, environ=environ
    )
    return gate, port


def _post(port: int, path: str, body: dict[str, Any], *, token: str = TOKEN) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"content-type": "application/json", "x-goog-api-key": token}
    try:
        connection.request("POST", path, body=json.dumps(body).encode(), headers=headers)
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def _body(*, tools: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}]}
    if tools:
        body["tools"] = [SHELL]
    return body


def test_streamed_and_whole_answers_are_metered_as_the_provider_reported(
    gateway: Gateway, tmp_path: Path
) -> None:
    with GeminiStandIn(answer_model="gemini-standin-001", web_search_requests=2) as provider:
        gate, port = _open(gateway, provider.origin, tmp_path / "l.jsonl")
        asked = [
            "/v1beta/models/gemini-standin:streamGenerateContent?alt=sse&key=" + TOKEN,
            "/v1beta/models/gemini-standin:generateContent",
            "/v1beta/models/gemini-standin:streamGenerateContent?alt=sse",
            "/v1beta/models/gemini-standin:countTokens",
        ]
        for decision, path in enumerate(asked):
            gate.pending_decision = decision
            status, answer = _post(port, path, _body())
            assert status == 200, answer
        totals = provider.usage_totals()
        seen = provider.requests()
        usage = ProviderUsage.model_validate(gateway.close_episode(gate))
    # The key travels in its header; the token, in a header or the query, never.
    assert {r.headers.get("x-goog-api-key") for r in seen} == {KEY}
    assert [r.path for r in seen] == [
        "/v1beta/models/gemini-standin:streamGenerateContent?alt=sse",
        *asked[1:],
    ]
    assert all(TOKEN not in json.dumps([r.path, r.headers]) for r in seen)
    overall = totals.overall
    assert overall.requests == 3 and overall.cache_read_tokens > 0
    assert overall.reasoning_tokens > 0  # thinking counts as output
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) == (
        overall.input_tokens,
        overall.output_tokens,
        overall.cache_read_tokens,
    )
    assert usage.provider_requests == 4 and usage.other_requests == 1  # countTokens
    assert [(m.model, m.requests) for m in usage.models] == [("gemini-standin-001", 3)]
    assert usage.server_tool_uses == 6  # three answers, two searches each
    # No Gemini prices are shipped: the cost is null, and the report says why.
    assert usage.cost is None and usage.cost_note is not None and "gemini" in usage.cost_note
    records = [json.loads(line) for line in (tmp_path / "l.jsonl").read_text().splitlines()]
    assert [r["requested_model"] for r in records] == ["gemini-standin"] * 4
    assert [r["complete"] for r in records[:3]] == [True, True, True]
    assert KEY not in (tmp_path / "l.jsonl").read_text()


def test_refusals_are_in_googles_error_shape_and_never_forwarded(
    gateway: Gateway, tmp_path: Path
) -> None:
    with GeminiStandIn() as provider:
        gate, port = _open(gateway, provider.origin, tmp_path / "l.jsonl")
        stream = "/v1beta/models/gemini-standin:streamGenerateContent?alt=sse"
        wrong = _post(port, stream, _body(), token="AIza-a-guess")
        route = _post(port, "/v1beta/models/gemini-standin:embedContent", _body())
        nested = _post(port, "/v1beta/models/a/b:generateContent", _body())
        dotted = _post(port, "/v1beta/models/..:generateContent", _body())
        gate.end()
        late = _post(port, stream, _body())
        assert provider.requests() == []
        gateway.close_episode(gate)
    statuses = [wrong[0], route[0], nested[0], dotted[0], late[0]]
    assert statuses == [401, 404, 404, 404, 403]
    for status, answer in (wrong, route, late):
        error = json.loads(answer)["error"]
        assert error["code"] == status and isinstance(error["message"], str)
    names = [json.loads(a)["error"]["status"] for _, a in (wrong, route, late)]
    assert names == ["UNAUTHENTICATED", "NOT_FOUND", "PERMISSION_DENIED"]


def _chunk(**fields: Any) -> bytes:
    return f"data: {json.dumps(fields)}\r\n\r\n".encode()


def test_the_last_usage_said_counts_and_a_stream_without_its_finish_is_incomplete() -> None:
    first = _chunk(
        candidates=[{"content": {"parts": [{"text": "Déjà 🤖"}]}}],
        usageMetadata={"promptTokenCount": 90},
        modelVersion="gemini-x",
    )
    last = _chunk(
        candidates=[{"content": {"parts": []}, "finishReason": "STOP"}],
        usageMetadata={
            "promptTokenCount": 100,
            "cachedContentTokenCount": 40,
            "candidatesTokenCount": 7,
            "thoughtsTokenCount": 5,
            "toolUsePromptTokenCount": 3,
        },
        modelVersion="gemini-x-002",
    )
    whole = metered("gemini", first + last)
    assert whole == Metered(
        model="gemini-x-002",
        input_tokens=103,
        output_tokens=12,
        cache_read_tokens=40,
        server_tool_uses=0,
        web_search_requests=0,
        complete=True,
    )
    cut = metered("gemini", first)
    assert (cut.complete, cut.input_tokens, cut.output_tokens) == (False, 90, 0)


def test_unreadable_counts_errors_and_search_queries() -> None:
    bad = _chunk(
        candidates=[{"finishReason": "STOP", "groundingMetadata": {"webSearchQueries": [1]}}],
        usageMetadata={"promptTokenCount": -1, "candidatesTokenCount": True},
    )
    read = metered("gemini", bad)
    assert (read.input_tokens, read.output_tokens, read.web_search_requests) == (None, None, None)
    error = {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}
    in_stream = metered("gemini", _chunk(**error))
    assert in_stream.error == "RESOURCE_EXHAUSTED" and not in_stream.complete
    body = json.dumps(error).encode()
    refused = metered("gemini", body, content_type="application/json", status=429)
    assert refused.error == "RESOURCE_EXHAUSTED"
    searched = _chunk(
        candidates=[
            {"finishReason": "STOP", "groundingMetadata": {"webSearchQueries": ["a", "b"]}},
            {"finishReason": "STOP", "groundingMetadata": {"webSearchQueries": ["b"]}},
        ],
        usageMetadata={"promptTokenCount": 1},
    )
    assert metered("gemini", searched).web_search_requests == 2


@pytest.mark.parametrize(
    ("path", "model"),
    [
        ("/v1beta/models/gemini-2.5-pro:streamGenerateContent", "gemini-2.5-pro"),
        ("/v1/models/gemini-2.5-flash:generateContent", "gemini-2.5-flash"),
        ("/v1beta/tunedModels/mine-1:generateContent", "mine-1"),
        ("/v1beta/models:list", None),
        ("/v1beta/models/a/b:generateContent", None),
        ("/v1beta/models/" + "m" * 300 + ":generateContent", None),
    ],
)
def test_the_requested_model_is_read_from_the_path(path: str, model: str | None) -> None:
    body = json.dumps({"model": "in-the-body"}).encode()
    assert requested_model(body, None, path=path, kind="gemini") == model
    assert requested_model(body, None, path=path, kind="anthropic") == "in-the-body"


@pytest.mark.parametrize(
    "route",
    [
        "POST /v1beta/models/{model}",
        "POST /v1beta/models/{model}:generateContent",
        "GET /v1/models",
    ],
)
def test_a_route_may_name_the_model_segment(route: str) -> None:
    declaration = GEMINI.model_copy(update={"routes": [route]})
    assert ProviderDeclaration.model_validate(declaration.model_dump()).routes == [route]


@pytest.mark.parametrize(
    "route",
    ["POST /v1beta/models/{other}:x", "POST /v1beta/models/{model", "PUT /v1/models", "POST x"],
)
def test_a_route_with_another_placeholder_is_refused(route: str) -> None:
    with pytest.raises(ValueError, match="is not a route"):
        ProviderDeclaration.model_validate({**GEMINI.model_dump(), "routes": [route]})
