"""The gateway section of the benchmark (`mailroom bench --only-gateway`): what the
provider gateway adds to an agent's request, against the same request sent straight to
the same upstream, measured in one run.

Absolute times on this machine move by tens of percent from one run to the next, so
every figure here is paired: direct and gatewayed requests alternate (a pair's order
flips from one pair to the next), against the same upstream, with the same bodies and
answers, so that whatever drifts hits both alike. What is reported is the difference and
the ratio of their percentiles.

Three processes, so that each one's CPU is its own:

- this one hosts only the `Gateway` (its loop thread serves every gate; this thread
  waits on a pipe while a phase runs), so its CPU time over a phase is the gateway's
  work for that phase's gatewayed requests, the meter and the ledger included;
- a stand-in upstream of the bench's own (`_upstream_main`: aiohttp on 127.0.0.1)
  answers `POST /v1/messages` in Anthropic's shape, as server-sent events or one JSON
  message, with the usage fields the meter reads, and checks that the real key arrived
  in place of the episode's token;
- a load generator (`_client_main`) sends the requests over keep-alive connections as
  an agent's client would, starting them at random moments at a set rate with a bound
  on those in flight (`GatewayBenchOptions`), and times them.

Each setting opens its gates on the one Gateway, each on a host-loopback listener of its
own as a worker holds them (`ActorNetwork(confined=False)`): first a single live gate,
then many (100+ by default), with the gatewayed requests spread over them. Per setting,
after a warm-up that opens the connections of both routes: a streamed answer (events
sent back to back), a JSON answer, and streams whose events the upstream spaces apart
(20 ms by default), each event stamped with its sending time on the machine's monotonic
clock, which every process shares: the extra delay per event through the gateway is
its transit (arrival minus sending) against the direct route's.

The headline figures pool the streamed and the JSON answers of both settings (and each
setting's own beside them): `gateway_added_ttfb_ms_p95` is the gatewayed requests' p95
time to first byte minus the direct ones'. Beside each phase's figures is the gateway
thread's time ready to run but without a CPU: the machine is shared, the gatewayed route
wakes two more processes' turns than the direct one, and a tail that is mostly waiting
for a CPU is the machine's load, not the gateway's work.

At the end every gate is closed and its metered usage read: each gate's request count
must equal the gatewayed requests the client sent it, every answer metered complete.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import multiprocessing
import os
import random
import re
import secrets
import socket
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnContext, SpawnProcess
from pathlib import Path
from typing import Any, Literal

import aiohttp
from aiohttp import web
from mailroom.measures import percentile
from mailroom.orchestrator.actors.actor_network import LOOPBACK, ActorNetwork
from mailroom.orchestrator.gateway.server import EpisodeGate, Gateway
from mailroom.orchestrator.records.provider import ProviderDeclaration

Answer = Literal["sse", "json", "spaced"]
MODEL = "claude-sonnet-4-5"  # priced in the shipped table: each answer's cost is computed
# The upstream's key: no secret (the stand-in only checks that the swap happened).
UPSTREAM_KEY = "sk-gateway-bench-upstream-key"
DECLARATION = ProviderDeclaration(
    kind="anthropic",
    key_variable="ANTHROPIC_API_KEY",
    base_url_variable="ANTHROPIC_BASE_URL",
    routes=["POST /v1/messages"],
)
ROUTE = "/v1/messages"
# How the client tells the stand-in which answer it wants (forwarded like any header).
ANSWER_HEADER = "x-bench-answer"
EVENTS_HEADER = "x-bench-events"
GAP_HEADER = "x-bench-gap-ms"
MAX_EVENTS = 1000
MAX_GAP_MS = 1000.0
TEXT_PER_EVENT = "the gateway passes this event on as it arrives, "  # 48 bytes
OUTPUT_TOKENS_PER_EVENT = 12
REQUEST_TIMEOUT_S = 60.0  # one request, start to end
START_TIMEOUT_S = 60.0  # a helper process's start (its imports) until it answers
COMMAND_TIMEOUT_S = 900.0  # one phase of the client, whatever its size
LIFETIME_S = 3600.0  # a helper process ends by then even if never told to
_SENT = re.compile(rb'"sent_ns":(\d+)')


@dataclass(frozen=True)
class GatewayBenchOptions:
    """`pairs` direct/gatewayed request pairs per answer kind and setting (`streams` for
    the spaced streams, `events` events `gap_ms` apart), `gates` live gates in the many
    setting, request bodies of `request_kb` KiB (the fast answers carry `events` text
    events as well).

    Pairs start at random moments, `rate` a second on average (0: back to back), at most
    `in_flight` at once (a pair's two requests go one after the other). Back to back,
    the client keeps the gateway saturated, and the figures then measure the queue that
    its own pace builds rather than what the gateway adds to a request; agents' requests
    arrive apart (each one's answer takes seconds), which the rate stands for: 100 pairs
    a second is 100 gatewayed requests a second, more than 120 agents ask for when each
    answer takes seconds."""

    pairs: int = 1500
    gates: int = 120
    rate: float = 100.0
    in_flight: int = 8
    streams: int = 100
    events: int = 10
    gap_ms: float = 20.0
    request_kb: int = 32

    def __post_init__(self) -> None:
        if min(self.pairs, self.gates, self.in_flight, self.streams, self.events) < 1:
            raise ValueError("every count of the gateway bench is at least 1")
        if not 0 < self.gap_ms <= MAX_GAP_MS or self.events > MAX_EVENTS:
            raise ValueError(f"gap_ms in (0, {MAX_GAP_MS:g}], events at most {MAX_EVENTS}")
        if not 0 <= self.rate < math.inf:
            raise ValueError("rate is finite and at least 0 (0: back to back)")
        if self.request_kb < 1:
            raise ValueError("request_kb is at least 1")


# --- the stand-in upstream (its own process) ---------------------------------------------


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _usage(input_tokens: int, output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
    }


def _bounded_int(text: str | None, low: int, high: int, default: int) -> int:
    try:
        return min(high, max(low, int(text))) if text is not None else default
    except ValueError:
        return default


def _bounded_ms(text: str | None) -> float:
    try:
        value = float(text) if text is not None else 0.0
    except ValueError:
        return 0.0
    return min(MAX_GAP_MS, value) if math.isfinite(value) and value > 0 else 0.0


async def _messages(request: web.Request) -> web.StreamResponse:
    """One answer, as the request's bench headers ask: a stream (its text events back to
    back, or spaced and stamped) or one JSON message. Input tokens are the body's bytes
    over four, so the metered totals can be checked against what was sent."""
    body = await request.read()
    served: Counter[str] = request.app[SERVED_KEY]
    if request.headers.get("x-api-key") != UPSTREAM_KEY:
        served["refused"] += 1
        error = {"type": "error", "error": {"type": "authentication_error", "message": "key"}}
        return web.json_response(error, status=401)
    answer = request.headers.get(ANSWER_HEADER, "json")
    events = _bounded_int(request.headers.get(EVENTS_HEADER), 1, MAX_EVENTS, 10)
    gap_s = _bounded_ms(request.headers.get(GAP_HEADER)) / 1000.0 if answer == "spaced" else 0.0
    input_tokens = max(1, len(body) // 4)
    output_tokens = events * OUTPUT_TOKENS_PER_EVENT
    served[answer if answer in ("sse", "json", "spaced") else "other"] += 1
    if answer not in ("sse", "spaced"):
        message = {
            "id": "msg_bench",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": [{"type": "text", "text": TEXT_PER_EVENT * events}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": _usage(input_tokens, output_tokens),
        }
        return web.json_response(message)
    response = web.StreamResponse(
        headers={"content-type": "text/event-stream", "cache-control": "no-cache"}
    )
    await response.prepare(request)
    start: dict[str, Any] = {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": _usage(input_tokens, 1),
    }
    await response.write(_event("message_start", {"type": "message_start", "message": start}))
    block = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    await response.write(_event("content_block_start", block))
    await response.write(_event("ping", {"type": "ping"}))
    for _ in range(events):
        delta: dict[str, Any] = {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": TEXT_PER_EVENT},
        }
        if gap_s:
            await asyncio.sleep(gap_s)
            delta["sent_ns"] = time.monotonic_ns()  # an extra field: clients pass it over
        await response.write(_event("content_block_delta", delta))
    await response.write(
        _event("content_block_stop", {"type": "content_block_stop", "index": 0})
        + _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
        )
        + _event("message_stop", {"type": "message_stop"})
    )
    await response.write_eof()
    return response


SERVED_KEY: web.AppKey[Counter[str]] = web.AppKey("served")


async def _upstream(conn: Connection, lifetime_s: float) -> None:
    app = web.Application(client_max_size=64 << 20)
    served: Counter[str] = Counter()
    app[SERVED_KEY] = served
    app.router.add_post(ROUTE, _messages)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    listener = socket.create_server((LOOPBACK, 0), backlog=512)
    await web.SockSite(runner, listener).start()
    conn.send(("port", int(listener.getsockname()[1])))
    deadline = time.monotonic() + lifetime_s
    try:
        # Told to stop (or the bench gone: end of file), else at the end of its lifetime.
        while time.monotonic() < deadline and not conn.poll():
            await asyncio.sleep(0.2)
    finally:
        with contextlib.suppress(OSError):
            conn.send(("served", dict(served)))
        await runner.cleanup()


def _upstream_main(conn: Connection, lifetime_s: float) -> None:
    """The stand-in upstream's process: serves until told to stop or `lifetime_s` ends,
    then reports how many requests of each kind it answered."""
    asyncio.run(_upstream(conn, lifetime_s))


# --- the load generator (its own process) ------------------------------------------------


@dataclass(frozen=True)
class _Phase:
    """One batch of the client's requests: `pairs` direct/gatewayed pairs of `answer`,
    the gatewayed ones spread over `gates` (port, token), starting `rate` a second on
    average (0: back to back), `in_flight` pairs at most at once."""

    answer: Answer
    pairs: int
    in_flight: int
    rate: float
    gates: tuple[tuple[int, str], ...]
    upstream_port: int
    request_bytes: int
    events: int
    gap_ms: float


@dataclass(frozen=True)
class _Sample:
    """One request as the client saw it (times in ms from just before it was sent)."""

    gated: bool
    port: int
    ttfb_ms: float
    total_ms: float
    # Spaced streams: each stamped event's arrival, and its transit from the upstream.
    arrivals_ms: tuple[float, ...] = ()
    transits_ms: tuple[float, ...] = ()


def request_body(stream: bool, size: int) -> bytes:
    """An Anthropic Messages request of exactly `size` bytes (at least its bare form's):
    the same size streamed or not, so both routes carry the same bytes."""
    document: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 1024,
        "stream": stream,
        "system": "You answer briefly.",
        "messages": [{"role": "user", "content": ""}],
    }
    bare = len(json.dumps(document).encode())
    filler = "a prompt as long as an agent's context, "
    missing = max(0, size - bare)
    document["messages"][0]["content"] = (filler * (missing // len(filler) + 1))[:missing]
    return json.dumps(document).encode()


async def _request(
    session: aiohttp.ClientSession, phase: _Phase, body: bytes, gate: tuple[int, str] | None
) -> _Sample:
    port, key = gate if gate is not None else (phase.upstream_port, UPSTREAM_KEY)
    headers = {
        "content-type": "application/json",
        "anthropic-version": "2023-06-01",
        "x-api-key": key,
        ANSWER_HEADER: phase.answer,
        EVENTS_HEADER: str(phase.events),
        GAP_HEADER: str(phase.gap_ms),
    }
    arrivals: list[float] = []
    transits: list[float] = []
    pending = b""
    first: int | None = None
    started = time.monotonic_ns()
    async with session.post(f"http://{LOOPBACK}:{port}{ROUTE}", data=body, headers=headers) as got:
        if got.status != 200:
            said = (await got.read())[:300]
            route = "gateway" if gate else "upstream"
            raise RuntimeError(f"the {route} answered {got.status}: {said!r}")
        async for chunk in got.content.iter_any():
            now = time.monotonic_ns()
            if first is None:
                first = now
            if phase.answer != "spaced":
                continue
            pending += chunk
            *ended, pending = pending.split(b"\n\n")
            for event in ended:
                sent = _SENT.search(event)
                if sent is not None:
                    arrivals.append((now - started) / 1e6)
                    transits.append((now - int(sent.group(1))) / 1e6)
    ended_at = time.monotonic_ns()
    return _Sample(
        gated=gate is not None,
        port=port,
        ttfb_ms=((first if first is not None else ended_at) - started) / 1e6,
        total_ms=(ended_at - started) / 1e6,
        arrivals_ms=tuple(arrivals),
        transits_ms=tuple(transits),
    )


async def _run_phase(session: aiohttp.ClientSession, phase: _Phase) -> tuple[list[_Sample], int]:
    """The phase's pairs, and how many waited for the bound on pairs in flight. Pairs
    start at random moments, `rate` a second on average (as requests from many agents
    arrive), or back to back when `rate` is 0; pair i goes direct first when i is even,
    through the gateway first when odd, its gatewayed request to gate i modulo the gates."""
    stream = phase.answer != "json"
    body = request_body(stream, phase.request_bytes)
    samples: list[_Sample] = []
    bound = asyncio.Semaphore(phase.in_flight)
    arrivals = random.Random(phase.pairs)
    loop = asyncio.get_running_loop()
    waited = 0

    async def pair(number: int) -> None:
        try:
            gate = phase.gates[number % len(phase.gates)]
            for gated in (False, True) if number % 2 == 0 else (True, False):
                samples.append(await _request(session, phase, body, gate if gated else None))
        finally:
            bound.release()

    pairs: list[asyncio.Task[None]] = []
    due = loop.time()
    try:
        for number in range(phase.pairs):
            if phase.rate > 0:
                due += arrivals.expovariate(phase.rate)
                await asyncio.sleep(max(0.0, due - loop.time()))
            if bound.locked():
                waited += 1
            await bound.acquire()
            pairs.append(asyncio.create_task(pair(number)))
        await asyncio.gather(*pairs)
    finally:
        for task in pairs:
            task.cancel()
    return samples, waited


async def _client(conn: Connection, lifetime_s: float) -> None:
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    deadline = time.monotonic() + lifetime_s
    async with aiohttp.ClientSession(
        connector=connector, timeout=timeout, trust_env=False, auto_decompress=False
    ) as session:
        conn.send(("ready", None))
        # Nothing else runs on this loop between phases: waiting on the pipe blocks it.
        while conn.poll(max(0.0, deadline - time.monotonic())):
            try:
                phase = conn.recv()
            except EOFError:
                return
            if phase is None:
                return
            try:
                samples, waited = await asyncio.wait_for(
                    _run_phase(session, phase), COMMAND_TIMEOUT_S
                )
            except Exception as exc:
                conn.send(("error", f"{type(exc).__name__}: {exc}"))
                continue
            conn.send(("done", len(samples)))  # first, small: the bench stops its clocks
            conn.send(("samples", (samples, waited)))


def _client_main(conn: Connection, lifetime_s: float) -> None:
    """The load generator's process: runs each phase it is sent, until told to stop (or
    `lifetime_s` ends); its CPU is its own, never the gateway's."""
    asyncio.run(_client(conn, lifetime_s))


# --- the bench (this process: the Gateway alone) -----------------------------------------


def _receive(conn: Connection, timeout_s: float, what: str) -> tuple[str, Any]:
    if not conn.poll(timeout_s):
        raise RuntimeError(f"the gateway bench's {what} did not answer within {timeout_s:g} s")
    try:
        kind, value = conn.recv()
    except EOFError:
        raise RuntimeError(f"the gateway bench's {what} ended early") from None
    if kind == "error":
        raise RuntimeError(f"the gateway bench's {what} failed: {value}")
    return str(kind), value


class _Helper:
    """A helper process of the bench, and the bench's end of its pipe."""

    def __init__(
        self, context: SpawnContext, target: Callable[[Connection, float], None], name: str
    ) -> None:
        self.name = name
        self.conn, child = context.Pipe()
        self.process: SpawnProcess = context.Process(
            target=target, args=(child, LIFETIME_S), name=name, daemon=True
        )
        self.process.start()
        child.close()

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=10)
        self.conn.close()


@dataclass
class _PhaseRun:
    samples: list[_Sample]
    waited: int  # pairs that waited for the bound on pairs in flight
    process_cpu_s: float
    thread_cpu_s: float | None
    thread_wait_s: float | None  # the gateway thread's time ready to run, but not running
    wall_s: float


def _thread_clocks(thread: threading.Thread | None) -> tuple[float | None, float | None]:
    """The thread's CPU time, and its time spent waiting for a CPU while ready to run
    (the kernel's scheduler statistics: on this shared machine, the part of a latency
    that is other processes' turn, not the gateway's work); None where not available."""
    if thread is None or thread.ident is None or thread.native_id is None:
        return None, None
    try:
        cpu: float | None = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    except OSError:
        cpu = None
    try:
        fields = Path(f"/proc/self/task/{thread.native_id}/schedstat").read_text().split()
        wait: float | None = int(fields[1]) / 1e9
    except (OSError, IndexError, ValueError):
        wait = None
    return cpu, wait


def _difference(after: float | None, before: float | None) -> float | None:
    return None if after is None or before is None else after - before


def _run(client: _Helper, phase: _Phase, loop_thread: threading.Thread | None) -> _PhaseRun:
    """One phase of the client, this process's CPU (and the gateway thread's) taken
    from just before it is sent to its end (this thread blocked on the pipe)."""
    thread_cpu, thread_wait = _thread_clocks(loop_thread)
    cpu_before = time.process_time()
    began = time.monotonic()
    client.conn.send(phase)
    _receive(client.conn, COMMAND_TIMEOUT_S + 30, "client")
    wall = time.monotonic() - began
    cpu = time.process_time() - cpu_before
    thread_cpu_after, thread_wait_after = _thread_clocks(loop_thread)
    _, (samples, waited) = _receive(client.conn, 60, "client")
    return _PhaseRun(
        samples=list(samples),
        waited=int(waited),
        process_cpu_s=cpu,
        thread_cpu_s=_difference(thread_cpu_after, thread_cpu),
        thread_wait_s=_difference(thread_wait_after, thread_wait),
        wall_s=wall,
    )


def _ms(value: float) -> float:
    return round(value, 3)


def _compared(direct: Sequence[float], gated: Sequence[float]) -> dict[str, Any]:
    """p50 and p95 of each route, the gateway's difference and ratio at each."""
    figures: dict[str, Any] = {"direct": len(direct), "gatewayed": len(gated)}
    for name, q in (("p50", 0.5), ("p95", 0.95)):
        straight = percentile(direct, q) if direct else math.nan
        through = percentile(gated, q) if gated else math.nan
        figures[f"direct_ms_{name}"] = _ms(straight)
        figures[f"gateway_ms_{name}"] = _ms(through)
        figures[f"added_ms_{name}"] = _ms(through - straight)
        figures[f"ratio_{name}"] = round(through / straight, 3) if straight > 0 else None
    return figures


def _gaps(samples: Sequence[_Sample]) -> list[float]:
    return [b - a for s in samples for a, b in itertools.pairwise(s.arrivals_ms)]


def _cpu(run: _PhaseRun, gated: int) -> dict[str, Any]:
    per = 1000.0 / gated if gated else math.nan
    return {
        "gatewayed_requests": gated,
        "process_cpu_ms_per_request": _ms(run.process_cpu_s * per),
        "gateway_thread_cpu_ms_per_request": (
            None if run.thread_cpu_s is None else _ms(run.thread_cpu_s * per)
        ),
        "gateway_thread_cpu_wait_ms_per_request": (
            None if run.thread_wait_s is None else _ms(run.thread_wait_s * per)
        ),
        "process_cpu_share_of_wall": round(run.process_cpu_s / run.wall_s, 3),
        "wall_s": round(run.wall_s, 3),
    }


def _phase_figures(answer: Answer, run: _PhaseRun) -> dict[str, Any]:
    direct = [s for s in run.samples if not s.gated]
    gated = [s for s in run.samples if s.gated]
    figures: dict[str, Any] = {
        "pairs_waited_for_bound": run.waited,
        "ttfb": _compared([s.ttfb_ms for s in direct], [s.ttfb_ms for s in gated]),
        "total": _compared([s.total_ms for s in direct], [s.total_ms for s in gated]),
        "cpu": _cpu(run, len(gated)),
    }
    if answer == "spaced":
        figures["event_delay"] = _event_delay(run.samples)
        figures["event_gap"] = _compared(_gaps(direct), _gaps(gated))
    return figures


@dataclass
class _Setting:
    """The gates of one setting, and what the client sent each."""

    gates: list[tuple[EpisodeGate, int, str]] = field(default_factory=list)
    sent: Counter[int] = field(default_factory=Counter)
    sent_bytes: int = 0

    def tally(self, samples: Sequence[_Sample], request_bytes: int) -> None:
        for sample in samples:
            if sample.gated:
                self.sent[sample.port] += 1
                self.sent_bytes += request_bytes


def _open_gates(
    gateway: Gateway, count: int, upstream_port: int, ledgers: Path, setting: _Setting
) -> None:
    environ = {
        DECLARATION.key_variable: UPSTREAM_KEY,
        DECLARATION.base_url_variable: f"http://{LOOPBACK}:{upstream_port}",
    }
    ledgers.mkdir(parents=True)
    for number in range(count):
        network = ActorNetwork(confined=False)
        try:
            port = network.port
            token = f"sk-gate-{secrets.token_urlsafe(24)}"
            gate = gateway.open(
                network.take_listener(),
                DECLARATION,
                token=token,
                ledger_path=ledgers / f"gate-{number}.jsonl",
                declared_model=MODEL,
                environ=environ,
            )
        finally:
            network.close()
        setting.gates.append((gate, port, token))


def _metering(setting: _Setting, usages: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    """What the gates metered against what the client sent through each."""
    metered = sum(int(u["provider_requests"]) for _, u in usages)
    costs = [u["cost"] for _, u in usages]
    return {
        "gatewayed_requests": sum(setting.sent.values()),
        "metered_requests": metered,
        "gates": len(usages),
        "gates_metered_exactly": sum(
            1 for port, u in usages if int(u["provider_requests"]) == setting.sent[port]
        ),
        "incomplete_or_failed": sum(
            int(u["unmetered_requests"]) + int(u["failed_requests"]) + int(u["refused_requests"])
            for _, u in usages
        ),
        "input_tokens": sum(int(u["input_tokens"]) for _, u in usages),
        "expected_input_tokens": setting.sent_bytes // 4 if setting.sent_bytes else 0,
        "cost_usd": None if any(c is None for c in costs) else round(sum(costs), 6),
    }


@dataclass
class _SettingRun:
    """One setting's figures, and its samples for the figures pooled over settings."""

    figures: dict[str, Any]
    fast: list[_Sample]  # the streamed and the JSON answers' phases
    spaced: list[_Sample]


def _pooled(samples: Sequence[_Sample]) -> dict[str, Any]:
    direct = [s for s in samples if not s.gated]
    gated = [s for s in samples if s.gated]
    return {
        "ttfb": _compared([s.ttfb_ms for s in direct], [s.ttfb_ms for s in gated]),
        "total": _compared([s.total_ms for s in direct], [s.total_ms for s in gated]),
    }


def _event_delay(samples: Sequence[_Sample]) -> dict[str, Any]:
    return _compared(
        [t for s in samples if not s.gated for t in s.transits_ms],
        [t for s in samples if s.gated for t in s.transits_ms],
    )


def _per_request(runs: Sequence[_PhaseRun], of: str) -> float | None:
    """CPU (or CPU wait) seconds of `runs` as ms per gatewayed request."""
    values = [getattr(run, of) for run in runs]
    gated = sum(1 for run in runs for s in run.samples if s.gated)
    if not gated or any(v is None for v in values):
        return None
    return _ms(sum(values) * 1000.0 / gated)


def _one_setting(
    gateway: Gateway,
    client: _Helper,
    upstream_port: int,
    count: int,
    options: GatewayBenchOptions,
    workdir: Path,
    loop_thread: threading.Thread | None,
) -> _SettingRun:
    """`count` live gates: the warm-up, then each answer kind's phase, then every gate
    closed and its usage read."""
    setting = _Setting()
    request_bytes = options.request_kb * 1024
    phases: dict[str, Any] = {}
    fast_runs: list[_PhaseRun] = []
    try:
        _open_gates(gateway, count, upstream_port, workdir / f"gates-{count}", setting)
        ports = tuple((port, token) for _, port, token in setting.gates)

        def phase(answer: Answer, pairs: int, rate: float) -> _Phase:
            return _Phase(
                answer=answer,
                pairs=pairs,
                in_flight=options.in_flight,
                rate=rate,
                gates=ports,
                upstream_port=upstream_port,
                request_bytes=request_bytes,
                events=options.events,
                gap_ms=options.gap_ms,
            )

        # A connection to every gate, and `in_flight` to the upstream on each route.
        warm = _run(client, phase("sse", max(count, options.in_flight), 0.0), loop_thread)
        setting.tally(warm.samples, request_bytes)
        fast: tuple[Answer, ...] = ("sse", "json")
        for answer in fast:
            run = _run(client, phase(answer, options.pairs, options.rate), loop_thread)
            setting.tally(run.samples, request_bytes)
            phases[answer] = _phase_figures(answer, run)
            fast_runs.append(run)
        spaced = _run(client, phase("spaced", options.streams, options.rate), loop_thread)
        setting.tally(spaced.samples, request_bytes)
        phases["spaced"] = _phase_figures("spaced", spaced)
    finally:
        usages = [(port, gateway.close_episode(gate)) for gate, port, _ in setting.gates]
    samples = [s for run in fast_runs for s in run.samples]
    figures = {
        "gates": count,
        "cpu_ms_per_request": _per_request(fast_runs, "process_cpu_s"),
        "cpu_wait_ms_per_request": _per_request(fast_runs, "thread_wait_s"),
        "pooled": _pooled(samples),
        **phases,
        "metering": _metering(setting, usages),
    }
    return _SettingRun(figures, samples, spaced.samples)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def gateway_bench(options: GatewayBenchOptions, workdir: Path) -> dict[str, Any]:
    """The section's figures (see the module docstring); `workdir` holds the gates'
    ledgers."""
    context = multiprocessing.get_context("spawn")
    load_before = _load()
    with contextlib.ExitStack() as stack:
        upstream = _Helper(context, _upstream_main, "gateway-bench-upstream")
        stack.callback(upstream.stop)
        client = _Helper(context, _client_main, "gateway-bench-client")
        stack.callback(client.stop)
        _, upstream_port = _receive(upstream.conn, START_TIMEOUT_S, "upstream")
        _receive(client.conn, START_TIMEOUT_S, "client")
        before = set(threading.enumerate())
        gateway = Gateway()
        stack.callback(gateway.close)
        loop_thread = next(
            (t for t in threading.enumerate() if t not in before and t.name == "gateway"), None
        )
        runs = {
            name: _one_setting(gateway, client, upstream_port, count, options, workdir, loop_thread)
            for name, count in (("one_gate", 1), ("many_gates", options.gates))
        }
        upstream.conn.send(None)
        _, served = _receive(upstream.conn, 30, "upstream")
    pooled = _pooled([s for run in runs.values() for s in run.fast])
    one, many = runs["one_gate"].figures, runs["many_gates"].figures
    return {
        "gateway_live_gates": options.gates,
        "gateway_added_ttfb_ms_p95": pooled["ttfb"]["added_ms_p95"],
        "gateway_added_ttfb_ms_p95_1_gate": one["pooled"]["ttfb"]["added_ms_p95"],
        "gateway_added_ttfb_ms_p95_many_gates": many["pooled"]["ttfb"]["added_ms_p95"],
        "gateway_added_total_ms_p95": pooled["total"]["added_ms_p95"],
        "gateway_added_event_delay_ms_p95": _event_delay(
            [s for run in runs.values() for s in run.spaced]
        )["added_ms_p95"],
        "gateway_cpu_ms_per_request_1_gate": one["cpu_ms_per_request"],
        "gateway_cpu_ms_per_request_many_gates": many["cpu_ms_per_request"],
        "pooled": pooled,
        "options": {
            "pairs": options.pairs,
            "streams": options.streams,
            "in_flight": options.in_flight,
            "rate_pairs_per_s": options.rate,
            "events": options.events,
            "gap_ms": options.gap_ms,
            "request_bytes": options.request_kb * 1024,
        },
        "load_average": {"before": load_before, "after": _load()},
        "upstream_served": served,
        **{name: run.figures for name, run in runs.items()},
    }


GATEWAY_HEADLINE = (
    "gateway_live_gates",
    "gateway_added_ttfb_ms_p95",
    "gateway_added_ttfb_ms_p95_1_gate",
    "gateway_added_ttfb_ms_p95_many_gates",
    "gateway_added_total_ms_p95",
    "gateway_added_event_delay_ms_p95",
    "gateway_cpu_ms_per_request_1_gate",
    "gateway_cpu_ms_per_request_many_gates",
)


def run_gateway_bench(options: GatewayBenchOptions) -> dict[str, Any]:
    """The gateway section alone (`mailroom bench --only-gateway`): its headline figures,
    the rest under `details.gateway`."""
    with tempfile.TemporaryDirectory(prefix="mailroom-bench-gateway-") as tmp:
        figures = gateway_bench(options, Path(tmp))
    return {**{key: figures[key] for key in GATEWAY_HEADLINE}, "details": {"gateway": figures}}
