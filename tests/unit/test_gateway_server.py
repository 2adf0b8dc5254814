"""The provider gateway's server on real sockets: a gate on a host-loopback listener, real
HTTP from the test as an agent's client would send it, forwarded to the stand-in
providers (or a small upstream of the test's own) on 127.0.0.1.

Streams pass through as they arrive; the provider's own usage is metered per request
and per decision; faults (429 then 200, an overload, a stream cut mid-event, no upstream
at all, a certificate that does not verify) are recorded as provider faults; budgets by
requests and by tokens refuse further requests; a price table with and without the
answering model gives a cost or null with the reason; and the key never reaches a
record.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from mailroom.orchestrator.actors.actor_network import ActorNetwork
from mailroom.orchestrator.gateway.server import (
    CA_BUNDLE_VARIABLE,
    EpisodeGate,
    Gateway,
    GatewayError,
)
from mailroom.orchestrator.perf.provider_standin.anthropic_standin import AnthropicStandIn
from mailroom.orchestrator.perf.provider_standin.openai_standin import OpenAIStandIn
from mailroom.orchestrator.records.provider import ProviderBudgets, ProviderDeclaration
from mailroom.orchestrator.records.result import ProviderUsage

KEY = "sk-real-key-gateway-server-test"
TOKEN = "sk-episode-token-of-this-test"
ANTHROPIC = ProviderDeclaration(
    kind="anthropic",
    key_variable="ANTHROPIC_API_KEY",
    base_url_variable="ANTHROPIC_BASE_URL",
    routes=["POST /v1/messages", "POST /v1/messages/count_tokens", "GET /v1/models"],
)
OPENAI = ProviderDeclaration(
    kind="openai_responses",
    key_variable="OPENAI_API_KEY",
    base_url_variable="OPENAI_BASE_URL",
    base_path="/v1",
    routes=["POST /v1/responses", "GET /v1/models"],
)
ENDPOINT_PROMPT = "Your endpoint directory: /nowhere/at-all\n"


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    served = Gateway()
    yield served
    served.close()


def _open(
    gateway: Gateway,
    declaration: ProviderDeclaration,
    upstream: str,
    ledger: Path,
    *,
    declared_model: str | None = None,
) -> tuple[EpisodeGate, int]:
    network = ActorNetwork(confined=False)
    port = network.port
    gate = gateway.open(
        network.take_listener(),
        declaration,
        token=TOKEN,
        ledger_path=ledger,
        declared_model=declared_model,
        environ={declaration.key_variable: KEY, declaration.base_url_variable: upstream},
    )
    return gate, port


def _anthropic_body(stream: bool, model: str = "claude-sonnet-4-5") -> bytes:
    return json.dumps(
        {
            "model": model,
            "max_tokens": 64,
            "stream": stream,
            "messages": [{"role": "user", "content": ENDPOINT_PROMPT}],
        }
    ).encode()


def _post(
    port: int, path: str, body: bytes, *, token: str = TOKEN, bearer: bool = False
) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
    headers["authorization" if bearer else "x-api-key"] = f"Bearer {token}" if bearer else token
    try:
        connection.request("POST", path, body=body, headers=headers)
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def _ledger(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_streams_and_json_answers_are_metered_exactly_as_the_provider_reported(
    gateway: Gateway, tmp_path: Path
) -> None:
    with AnthropicStandIn(answer_model="claude-haiku-4-5") as provider:
        gate, port = _open(
            gateway, ANTHROPIC, provider.origin, tmp_path / "l.jsonl", declared_model="m"
        )
        for decision, stream in ((0, True), (1, False), (1, True), (2, True)):
            gate.pending_decision = decision
            status, body = _post(port, "/v1/messages?beta=true", _anthropic_body(stream))
            assert status == 200, body
        totals = provider.usage_totals()
        seen = provider.requests()
        usage = ProviderUsage.model_validate(gateway.close_episode(gate))
    assert {r.headers.get("x-api-key") for r in seen} == {KEY}
    assert all(r.path == "/v1/messages?beta=true" for r in seen)
    overall = totals.overall
    assert (usage.input_tokens, usage.output_tokens) == (
        overall.input_tokens,
        overall.output_tokens,
    )
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (
        overall.cache_read_tokens,
        overall.cache_write_tokens,
    )
    assert overall.cache_read_tokens > 0 and overall.cache_write_tokens > 0
    assert [(m.model, m.requests) for m in usage.models] == [("claude-haiku-4-5", 4)]
    assert usage.model_verified is False and usage.declared_model == "m"
    assert [(d.decision, d.requests) for d in usage.decisions] == [(0, 1), (1, 2), (2, 1)]
    # Priced from the shipped table: the answering model is in it.
    assert usage.cost is not None and usage.cost > 0 and usage.cost_note is None
    records = _ledger(tmp_path / "l.jsonl")
    assert [r["outcome"] for r in records] == ["answered"] * 4
    assert all(r["first_byte_ms"] is not None and r["complete"] for r in records)
    assert KEY not in (tmp_path / "l.jsonl").read_text()
    assert TOKEN not in (tmp_path / "l.jsonl").read_text()


def test_an_unpriced_model_costs_null_with_the_reason(gateway: Gateway, tmp_path: Path) -> None:
    with OpenAIStandIn() as provider:
        gate, port = _open(gateway, OPENAI, provider.origin + "/v1", tmp_path / "l.jsonl")
        body = json.dumps(
            {"model": "standin-unpriced", "stream": True, "input": ENDPOINT_PROMPT}
        ).encode()
        status, _ = _post(port, "/v1/responses", body, bearer=True)
        assert status == 200
        (seen,) = provider.requests()
        usage = ProviderUsage.model_validate(gateway.close_episode(gate))
    assert seen.headers.get("authorization") == f"Bearer {KEY}" and seen.path == "/v1/responses"
    assert usage.cost is None and usage.cost_note is not None
    assert "standin-unpriced" in usage.cost_note
    assert usage.models[0].cost is None and usage.model_verified is None


def test_refusals_are_answered_in_the_providers_shape_and_never_forwarded(
    gateway: Gateway, tmp_path: Path
) -> None:
    small = ANTHROPIC.model_copy(update={"max_request_bytes": 4096})
    with AnthropicStandIn() as provider:
        gate, port = _open(gateway, small, provider.origin, tmp_path / "l.jsonl")
        wrong = _post(port, "/v1/messages", _anthropic_body(False), token="sk-guess")
        route = _post(port, "/v1/complete", _anthropic_body(False))
        huge = _post(port, "/v1/messages", b"{" + b" " * 8192 + b"}")
        gate.end()
        late = _post(port, "/v1/messages", _anthropic_body(False))
        assert provider.requests() == []
        usage = ProviderUsage.model_validate(gateway.close_episode(gate))
    assert [wrong[0], route[0], huge[0], late[0]] == [401, 404, 413, 403]
    for _, body in (wrong, route, huge, late):
        document = json.loads(body)
        assert document["type"] == "error" and document["error"]["type"]
    assert usage.refused_requests == 4 and usage.provider_requests == 0
    reasons = [r["reason"] for r in _ledger(tmp_path / "l.jsonl")]
    assert reasons == ["token", "route", "size", "episode_over"]


def test_provider_faults_are_recorded_and_the_episode_goes_on(
    gateway: Gateway, tmp_path: Path
) -> None:
    with AnthropicStandIn() as provider:
        gate, port = _open(gateway, ANTHROPIC, provider.origin, tmp_path / "l.jsonl")
        provider.rate_limit(1)
        first = _post(port, "/v1/messages", _anthropic_body(True))
        second = _post(port, "/v1/messages", _anthropic_body(True))
        provider.overload()
        overloaded = _post(port, "/v1/messages", _anthropic_body(True))
        provider.end_overload()
        provider.cut_stream(provider.generation_requests + 1)
        with pytest.raises((http.client.IncompleteRead, ConnectionError)):
            _post(port, "/v1/messages", _anthropic_body(True))
        usage = ProviderUsage.model_validate(gateway.close_episode(gate))
    assert (first[0], second[0], overloaded[0]) == (429, 200, 529)
    records = _ledger(tmp_path / "l.jsonl")
    assert [(r["outcome"], r["reason"]) for r in records] == [
        ("provider_fault", "rate_limited"),
        ("answered", None),
        ("provider_fault", "overloaded"),
        ("provider_fault", "stream_cut"),
    ]
    assert usage.failed_requests == 3 and usage.provider_requests == 4
    assert usage.models[0].requests == 1


def test_an_unreachable_or_unverified_upstream_is_a_provider_fault(
    gateway: Gateway, tmp_path: Path
) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed_port = unused.getsockname()[1]
    gate, port = _open(gateway, ANTHROPIC, f"http://127.0.0.1:{closed_port}", tmp_path / "a.jsonl")
    status, body = _post(port, "/v1/messages", _anthropic_body(False))
    gateway.close_episode(gate)
    assert status == 502 and json.loads(body)["error"]["type"] == "api_error"
    (record,) = _ledger(tmp_path / "a.jsonl")
    assert (record["outcome"], record["reason"]) == ("provider_fault", "connection")

    # A TLS server whose certificate no authority signed: refused, never sent the key.
    plain = _PlainServer()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*_self_signed(tmp_path))
    plain.server.socket = context.wrap_socket(plain.server.socket, server_side=True)
    with plain:
        gate, port = _open(
            gateway, ANTHROPIC, f"https://127.0.0.1:{plain.port}", tmp_path / "t.jsonl"
        )
        status, _ = _post(port, "/v1/messages", _anthropic_body(False))
        gateway.close_episode(gate)
    assert status == 502 and plain.keys_seen == []
    (record,) = _ledger(tmp_path / "t.jsonl")
    assert (record["outcome"], record["reason"]) == ("provider_fault", "tls")


def test_a_named_ca_bundle_lets_the_gateway_verify_a_proxys_own_authority(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = _self_signed(tmp_path)
    monkeypatch.setenv(CA_BUNDLE_VARIABLE, cert)
    trusting = Gateway()
    plain = _PlainServer()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    plain.server.socket = context.wrap_socket(plain.server.socket, server_side=True)
    try:
        with plain:
            gate, port = _open(
                trusting, ANTHROPIC, f"https://127.0.0.1:{plain.port}", tmp_path / "t.jsonl"
            )
            status, _ = _post(port, "/v1/messages", _anthropic_body(False))
            usage = ProviderUsage.model_validate(trusting.close_episode(gate))
    finally:
        trusting.close()
    assert status == 200 and plain.keys_seen == [KEY]
    assert usage.input_tokens == 11 and usage.failed_requests == 0


def test_budgets_by_requests_and_by_tokens_refuse_further_requests(
    gateway: Gateway, tmp_path: Path
) -> None:
    by_requests = ANTHROPIC.model_copy(update={"budgets": ProviderBudgets(requests=2)})
    by_tokens = ANTHROPIC.model_copy(update={"budgets": ProviderBudgets(output_tokens=1)})
    with AnthropicStandIn() as provider:
        gate, port = _open(gateway, by_requests, provider.origin, tmp_path / "r.jsonl")
        statuses = [_post(port, "/v1/messages", _anthropic_body(False))[0] for _ in range(3)]
        assert statuses == [200, 200, 429] and gate.exhausted is not None
        assert "2 requests of the declared 2" in gate.exhausted
        gateway.close_episode(gate)
        gate, port = _open(gateway, by_tokens, provider.origin, tmp_path / "t.jsonl")
        statuses = [_post(port, "/v1/messages", _anthropic_body(False))[0] for _ in range(2)]
        assert statuses == [200, 429] and gate.exhausted is not None
        assert "output tokens" in gate.exhausted
        assert len(provider.requests()) == 3
        gateway.close_episode(gate)
    reasons = [r["reason"] for r in _ledger(tmp_path / "t.jsonl")]
    assert reasons == [None, "budget"]


def test_a_stream_passes_through_as_it_arrives(gateway: Gateway, tmp_path: Path) -> None:
    """The upstream holds its second event until the test has read the first through the
    gateway: a gateway that buffered the answer would never deliver it."""
    released = threading.Event()
    upstream = _PlainServer(hold=released)
    with upstream:
        gate, port = _open(gateway, ANTHROPIC, upstream.origin, tmp_path / "s.jsonl")
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request(
            "POST", "/v1/messages", body=_anthropic_body(True), headers={"x-api-key": TOKEN}
        )
        answer = connection.getresponse()
        first = answer.readline()  # the first event's line, before the upstream goes on
        released.set()
        rest = answer.read()
        connection.close()
        usage = ProviderUsage.model_validate(gateway.close_episode(gate))
    assert first.startswith(b"event: message_start")
    assert b"message_stop" in rest
    assert usage.output_tokens == 7 and usage.input_tokens == 11


def test_the_key_must_be_set_and_the_upstream_must_be_plain(
    gateway: Gateway, tmp_path: Path
) -> None:
    for environ in (
        {"ANTHROPIC_BASE_URL": "http://127.0.0.1:1"},
        {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": "http://user:pw@127.0.0.1:1"},
        {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": "ftp://127.0.0.1"},
    ):
        network = ActorNetwork(confined=False)
        listener = network.take_listener()
        with pytest.raises(GatewayError):
            gateway.open(listener, ANTHROPIC, token=TOKEN, ledger_path=None, environ=environ)
        assert listener.fileno() == -1  # closed, not leaked


class _PlainServer:
    """An upstream of the test's own: one Anthropic stream, optionally held after its
    first event; records which keys it saw."""

    def __init__(self, hold: threading.Event | None = None) -> None:
        owner = self
        self.keys_seen: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                owner.keys_seen.append(self.headers.get("x-api-key", ""))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                start = {
                    "type": "message_start",
                    "message": {"model": "m", "usage": {"input_tokens": 11, "output_tokens": 1}},
                }
                events = [
                    ("message_start", start),
                    ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 7}}),
                    ("message_stop", {"type": "message_stop"}),
                ]
                for index, (name, data) in enumerate(events):
                    chunk = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                    if index == 0 and hold is not None:
                        hold.wait(30)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> _PlainServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)


def _self_signed(tmp_path: Path) -> tuple[str, str]:
    """A certificate and key for 127.0.0.1 that no authority signed (openssl)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)
