"""The provider gateway of one worker process: an asyncio loop in a thread of its own,
serving every live episode of the worker, each on the listening socket its actor reaches
(`actors/actor_network.py`).

A request is checked before anything is forwarded: the episode is still open, it
presents the episode's own token, its route is one the profile declares, its body is
within the declared size, and no declared budget is spent. A refusal is answered in the
provider's error shape and recorded. Otherwise the token is swapped for the real key
(read from the launch's environment, held in memory only), the request goes to the
declared upstream, and the answer streams back chunk by chunk as it arrives while a
meter reads the provider's own usage fields from it (`metering.py`). Every request ends
as one record of its episode's ledger (`ledger.py`).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hmac
import os
import socket
import ssl
import threading
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode, urlsplit

import aiohttp
from aiohttp import web
from mailroom.orchestrator.gateway.ledger import (
    EpisodeLedger,
    Outcome,
    RequestRecord,
    budget_passed,
    usage_document,
)
from mailroom.orchestrator.gateway.metering import requested_model, response_meter
from mailroom.orchestrator.gateway.prices import PriceTable, load_price_table
from mailroom.orchestrator.gateway.providers import (
    CREDENTIAL_HEADERS,
    CREDENTIAL_QUERY,
    NOT_FORWARDED,
    NOT_RETURNED,
    PROVIDER_APIS,
    ProviderApi,
    presented_token,
)
from mailroom.orchestrator.records.provider import ProviderDeclaration

T = TypeVar("T")
CONNECT_TIMEOUT_S = 30.0
READ_TIMEOUT_S = 600.0  # between two chunks of an answer (a long generation streams)
SHUTDOWN_S = 2.0
CALL_TIMEOUT_S = 30.0
# A CA bundle for HTTPS upstreams besides the system's (a proxy's own authority).
CA_BUNDLE_VARIABLE = "MAILROOM_PROVIDER_CA_BUNDLE"


class GatewayError(RuntimeError):
    """The gateway cannot serve an episode (no key, a bad upstream)."""


def upstream_of(declaration: ProviderDeclaration, environ: Mapping[str, str]) -> str:
    """The upstream base URL: the launch environment's `base_url_variable` when set (a
    proxy, a stand-in), else the provider's public API. Credentials in it are refused
    (the key travels in its header only)."""
    api = PROVIDER_APIS[declaration.kind]
    url = environ.get(declaration.base_url_variable) or api.public_base_url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise GatewayError(
            f"{declaration.base_url_variable}={url!r} is not an http(s) URL with a host"
        )
    if parts.username or parts.password or parts.query or parts.fragment:
        raise GatewayError(
            f"{declaration.base_url_variable} may hold no credentials, query or fragment"
        )
    return url.rstrip("/")


def provider_key(declaration: ProviderDeclaration, environ: Mapping[str, str]) -> str:
    key = environ.get(declaration.key_variable, "")
    if not key or any(c in key for c in "\r\n\0"):
        raise GatewayError(
            f"{declaration.key_variable} is not set in the launch's environment: the gateway "
            "reads the provider key there (it never enters a sandbox or a record)"
        )
    return key


@dataclass
class EpisodeGate:
    """One episode's door to its provider: what it may send, where to, and its ledger.

    `pending_decision` is set by the episode as each observation goes out (0 before the
    first); `end` is called when `closed.json` is published: later requests are refused.
    """

    declaration: ProviderDeclaration
    token: str
    key: str = field(repr=False)
    upstream: str
    ledger: EpisodeLedger
    prices: PriceTable
    declared_model: str | None = None
    pending_decision: int = 0
    ended: bool = False
    exhausted: str | None = None  # the budget found used up, in words

    @property
    def api(self) -> ProviderApi:
        return PROVIDER_APIS[self.declaration.kind]

    def end(self) -> None:
        self.ended = True

    def usage(self) -> dict[str, Any]:
        return usage_document(
            self.ledger.records, provider=self.declaration.kind, declared_model=self.declared_model
        )

    def spent_budget(self) -> str | None:
        budgets = self.declaration.budgets
        if not budgets.any:
            return None
        cost = self.ledger.spent_usd() if budgets.cost_usd is not None else None
        return budget_passed(budgets, self.ledger.spent(), cost)

    def refusal(self, method: str, path: str, headers: Mapping[str, str]) -> tuple[int, str, str]:
        """(status, error type, message) for a request that must not be forwarded, or
        (0, "", "")."""
        if self.ended:
            return 403, "permission_error", "the episode is over: no further model requests"
        presented = presented_token({k.lower(): v for k, v in headers.items()}) or ""
        if not hmac.compare_digest(presented.encode(), self.token.encode()):
            return 401, "authentication_error", "invalid x-api-key"
        if not self.declaration.allows(method, path):
            return 404, "not_found_error", f"{method} {path} is not a route of this gateway"
        spent = self.spent_budget()
        if spent is not None:
            self.exhausted = spent
            return 429, "budget_exhausted", f"the method's declared budget is spent: {spent}"
        return 0, "", ""


GATE_KEY: web.AppKey[EpisodeGate] = web.AppKey("gate", EpisodeGate)


def _elapsed_ms(since: float) -> float:
    return round((time.monotonic() - since) * 1000, 3)


def _fault_of_status(status: int) -> str | None:
    if status == 429:
        return "rate_limited"
    if status in (503, 529):
        return "overloaded"
    if status >= 500:
        return "server_error"
    return None


async def _refuse(
    request: web.Request, gate: EpisodeGate, status: int, kind: str, message: str, why: str
) -> web.Response:
    gate.ledger.add(
        RequestRecord(
            decision=gate.pending_decision,
            method=request.method,
            route=request.rel_url.raw_path[:300],
            outcome="refused",
            reason=why,
            status=status,
            request_bytes=request.content_length or 0,
        )
    )
    body = gate.api.error_body(status, kind, message)
    return web.Response(status=status, body=body, content_type="application/json")


async def _read_body(request: web.Request, cap: int) -> bytes | None:
    """The request's body, or None when it passes `cap` (read no further)."""
    if request.content_length is not None and request.content_length > cap:
        return None
    body = bytearray()
    async for chunk in request.content.iter_any():
        body += chunk
        if len(body) > cap:
            return None
    return bytes(body)


async def handle(request: web.Request) -> web.StreamResponse:
    gate = request.app[GATE_KEY]
    started = time.monotonic()
    decision = gate.pending_decision
    path = request.rel_url.raw_path
    if request.method == "HEAD" and path == "/":
        return web.Response(status=200)  # a client's reachability probe: answered here
    status, kind, message = gate.refusal(request.method, path, request.headers)
    if status:
        why = {401: "token", 403: "episode_over", 404: "route", 429: "budget"}[status]
        return await _refuse(request, gate, status, kind, message, why)
    body = await _read_body(request, gate.declaration.max_request_bytes)
    if body is None:
        limit = gate.declaration.max_request_bytes
        return await _refuse(
            request, gate, 413, "request_too_large", f"the body passes {limit} bytes", "size"
        )
    headers = {
        name: value
        for name, value in request.headers.items()
        if name.lower() not in NOT_FORWARDED and name.lower() not in CREDENTIAL_HEADERS
    }
    headers.update(gate.api.key_headers(gate.key))
    headers["accept-encoding"] = "identity"  # the meter reads the answer as it streams
    base_path = gate.declaration.base_path
    tail = path[len(base_path) :] if base_path and path.startswith(base_path) else path
    url = gate.upstream + tail + _forwarded_query(request)
    common: dict[str, Any] = {
        "decision": decision,
        "method": request.method,
        "route": path,
        "request_bytes": len(body),
        "requested_model": requested_model(
            body, request.headers.get("content-encoding"), path=tail, kind=gate.declaration.kind
        ),
    }
    session: aiohttp.ClientSession = request.app[SESSION_KEY]
    try:
        upstream = await session.request(
            request.method, url, data=body or None, headers=headers, allow_redirects=False
        )
    except (aiohttp.ClientSSLError, ssl.SSLError) as exc:
        return await _unreachable(request, gate, common, started, "tls", exc)
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        return await _unreachable(request, gate, common, started, "connection", exc)
    return await _stream_back(request, gate, upstream, common, started)


def _forwarded_query(request: web.Request) -> str:
    """The request's query as sent, less any parameter that may carry a credential."""
    if not request.query:
        return ""
    if not any(name.lower() in CREDENTIAL_QUERY for name in request.query):
        return f"?{request.rel_url.raw_query_string}"
    kept = [(k, v) for k, v in request.query.items() if k.lower() not in CREDENTIAL_QUERY]
    return f"?{urlencode(kept)}" if kept else ""


async def _unreachable(
    request: web.Request,
    gate: EpisodeGate,
    common: dict[str, Any],
    started: float,
    fault: str,
    exc: BaseException,
) -> web.Response:
    gate.ledger.add(
        RequestRecord(
            outcome="provider_fault",
            reason=fault,
            status=502,
            total_ms=_elapsed_ms(started),
            **common,
        )
    )
    kind = "api_error" if gate.api.kind == "anthropic" else "server_error"
    message = f"the provider could not be reached ({fault}: {type(exc).__name__})"
    body = gate.api.error_body(502, kind, message)
    return web.Response(status=502, body=body, content_type="application/json")


async def _stream_back(
    request: web.Request,
    gate: EpisodeGate,
    upstream: aiohttp.ClientResponse,
    common: dict[str, Any],
    started: float,
) -> web.StreamResponse:
    first_byte: float | None = None
    sent = 0
    fault = _fault_of_status(upstream.status)
    outcome: Outcome = "provider_fault" if fault else "answered"
    meter = response_meter(
        gate.declaration.kind, upstream.headers.get("content-type"), upstream.status
    )
    answer = web.StreamResponse(status=upstream.status, reason=upstream.reason)
    for name, value in upstream.headers.items():
        if name.lower() not in NOT_RETURNED:
            answer.headers.add(name, value)
    try:
        try:
            await answer.prepare(request)
            async for chunk in upstream.content.iter_any():
                if first_byte is None:
                    first_byte = _elapsed_ms(started)
                meter.feed(chunk)
                sent += len(chunk)
                await answer.write(chunk)
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError) as _cut:
            fault, outcome = "stream_cut", "provider_fault"
        except TimeoutError:
            fault, outcome = "stream_timeout", "provider_fault"
        except (ConnectionResetError, aiohttp.ClientConnectionResetError):
            outcome = "agent_gone"
        if fault in ("stream_cut", "stream_timeout"):
            # The agent sees its stream cut as the gateway saw it, never a clean end.
            if request.transport is not None:
                request.transport.abort()
        elif outcome != "agent_gone":
            with contextlib.suppress(ConnectionResetError, aiohttp.ClientConnectionResetError):
                await answer.write_eof()
    finally:
        upstream.release()
        gate.ledger.add(
            RequestRecord.metered(
                meter.finish(),
                prices=gate.prices,
                provider=gate.declaration.kind,
                outcome=outcome,
                reason=fault,
                status=None if fault in ("stream_cut", "stream_timeout") else upstream.status,
                first_byte_ms=first_byte,
                total_ms=_elapsed_ms(started),
                response_bytes=sent,
                **common,
            )
        )
    return answer


SESSION_KEY: web.AppKey[aiohttp.ClientSession] = web.AppKey("session", aiohttp.ClientSession)


def _tls_context() -> ssl.SSLContext:
    return ssl.create_default_context(cafile=launch_environment().get(CA_BUNDLE_VARIABLE) or None)


class Gateway:
    """One worker's gateway: its loop thread, one upstream client, an app per episode."""

    def __init__(self, *, price_table: Path | None = None) -> None:
        self.prices = load_price_table(price_table)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="gateway", daemon=True)
        self._thread.start()
        self._session = self._call(self._new_session())
        self._runners: dict[int, web.AppRunner] = {}

    def _call(self, coroutine: Coroutine[Any, Any, T], timeout: float = CALL_TIMEOUT_S) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    async def _new_session(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=0, ssl=_tls_context())
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=CONNECT_TIMEOUT_S, sock_read=READ_TIMEOUT_S
        )
        # trust_env off: the upstream is the declared one, never a proxy from the environment.
        return aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False)

    def open(
        self,
        listener: socket.socket,
        declaration: ProviderDeclaration,
        *,
        token: str,
        ledger_path: Path | None,
        declared_model: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> EpisodeGate:
        """Serve one episode on `listener` (now the gateway's: closed at `close_episode`)."""
        source = launch_environment() if environ is None else environ
        try:
            gate = EpisodeGate(
                declaration=declaration,
                token=token,
                key=provider_key(declaration, source),
                upstream=upstream_of(declaration, source),
                ledger=EpisodeLedger(ledger_path),
                prices=self.prices,
                declared_model=declared_model,
            )
            self._runners[id(gate)] = self._call(self._serve(listener, gate))
        except BaseException:
            listener.close()
            raise
        return gate

    async def _serve(self, listener: socket.socket, gate: EpisodeGate) -> web.AppRunner:
        app = web.Application(client_max_size=gate.declaration.max_request_bytes + 1)
        app[GATE_KEY] = gate
        app[SESSION_KEY] = self._session
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_S)
        await runner.setup()
        await web.SockSite(runner, listener).start()
        return runner

    def close_episode(self, gate: EpisodeGate) -> dict[str, Any]:
        """Stop serving the episode (its socket closed, requests in flight given
        `SHUTDOWN_S`), and its metered usage."""
        gate.end()
        runner = self._runners.pop(id(gate), None)
        if runner is not None:
            with contextlib.suppress(Exception):
                self._call(runner.cleanup(), timeout=SHUTDOWN_S + CALL_TIMEOUT_S)
        gate.ledger.close()
        return gate.usage()

    def close(self) -> None:
        for gate_id in list(self._runners):
            runner = self._runners.pop(gate_id)
            with contextlib.suppress(Exception):
                self._call(runner.cleanup())
        with contextlib.suppress(Exception):
            self._call(self._session.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)


_WORKER_GATEWAY: Gateway | None = None
_WORKER_LOCK = threading.Lock()
# What a worker on a cluster node was handed of the launch's environment (the key, the
# upstream): held in this process's memory only, never in its environment, a file or
# anything Ray keeps (`hand_provider_environment`).
_HANDED: dict[str, str] = {}


def hand_provider_environment(values: Mapping[str, str]) -> None:
    """Give this worker process the launch's provider variables (a Ray worker's own
    environment is its node's, not the launch's)."""
    _HANDED.update(values)


def launch_environment() -> dict[str, str]:
    """The launch's environment as this process has it: its own, and what it was handed."""
    return {**os.environ, **_HANDED}


def provider_environment(declaration: ProviderDeclaration) -> dict[str, str]:
    """The launch's provider variables a worker elsewhere needs (the key, the upstream)."""
    names = (
        declaration.key_variable,
        declaration.base_url_variable,
        PRICE_TABLE_VARIABLE,
        CA_BUNDLE_VARIABLE,
    )
    return {name: os.environ[name] for name in names if os.environ.get(name)}


def worker_gateway() -> Gateway:
    """This process's gateway, started at its first gated episode."""
    global _WORKER_GATEWAY
    with _WORKER_LOCK:
        if _WORKER_GATEWAY is None:
            _WORKER_GATEWAY = Gateway(price_table=_price_table_path())
            atexit.register(_WORKER_GATEWAY.close)
        return _WORKER_GATEWAY


PRICE_TABLE_VARIABLE = "MAILROOM_PRICE_TABLE"


def _price_table_path() -> Path | None:
    """A user's own price table (`mailroom launch --price-table`), else the shipped one."""
    return _price_table_path_in(launch_environment())


def manifest_record(
    declaration: ProviderDeclaration, environ: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], str]:
    """What a run's manifest records of its gateway (`provider_gateway`: the provider, the
    forwarded routes, the key's variable name, the request size, the price table by hash,
    the method's budgets) and its upstream (volatile). Raises `GatewayError` for a bad
    upstream and `PriceTableError` for a bad price table, before anything starts."""
    source = os.environ if environ is None else environ
    prices = load_price_table(_price_table_path_in(source))
    record = {
        "provider": declaration.kind,
        "routes": list(declaration.routes),
        "key_variable": declaration.key_variable,
        "max_request_bytes": declaration.max_request_bytes,
        "price_table": {
            "sha256": prices.sha256,
            "source": prices.document.source,
            "retrieved": prices.document.retrieved.isoformat(),
            "user_file": not prices.shipped,
        },
        "budgets": declaration.budgets.model_dump(mode="json"),
    }
    return record, upstream_of(declaration, source)


def _price_table_path_in(environ: Mapping[str, str]) -> Path | None:
    named = environ.get(PRICE_TABLE_VARIABLE)
    return Path(named) if named else None
