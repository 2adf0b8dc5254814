"""A stand-in model provider on 127.0.0.1: a threaded HTTP server that records requests.

Subclasses answer each request with `Reply` (a JSON document, a server-sent event
stream, or an empty status). Streams go out with chunked transfer encoding, one chunk
per event, like a real provider's. A reply may be cut off (`Cut`): part of one event's
bytes (or of the JSON body) go out, then the connection closes without the final chunk.

`ScriptedStandIn` adds what both providers share: every generation request (a POST to
the provider's generation route) gets a number, 1, 2, 3, ... in arrival order; a ledger
keeps, per generation request, the usage and the model its answer reported; and faults
are scripted per instance (`rate_limit`, `overload`, `cut_stream`).
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Literal, Self
from urllib.parse import urlsplit

from mailroom.orchestrator.perf.provider_standin.driver import DriverSettings

MAX_BODY_BYTES = 64 << 20


@dataclass(frozen=True)
class Request:
    """One request as received (the body decoded from JSON where it is JSON)."""

    method: str
    path: str  # with its query string
    headers: dict[str, str]
    body: bytes
    received_at: float

    @property
    def route(self) -> str:
        """The path without its query string."""
        return urlsplit(self.path).path

    def json(self) -> Any:
        if not self.body:
            return None
        try:
            return json.loads(self.body)
        except ValueError:
            return None


@dataclass(frozen=True)
class SseEvent:
    name: str
    data: dict[str, Any]

    def encode(self) -> bytes:
        """The event as sent; an unnamed one (`name` empty) is its data line alone."""
        named = f"event: {self.name}\n" if self.name else ""
        return f"{named}data: {json.dumps(self.data)}\n\n".encode()


@dataclass(frozen=True)
class Cut:
    """Where a reply breaks off: the whole events before `event`, then the first `keep`
    bytes of event `event` (in a chunk of their own), then the connection closes with no
    final chunk. A JSON reply sends its full Content-Length and `keep` bytes of its body."""

    event: int
    keep: int


@dataclass(frozen=True)
class Reply:
    status: int = 200
    document: Any = None  # a JSON body, when not None
    events: Sequence[SseEvent] | None = None  # a server-sent event stream, when not None
    headers: dict[str, str] = field(default_factory=dict)
    cut: Cut | None = None


@dataclass(frozen=True)
class Recorded:
    """What the stand-in keeps of each request, for tests."""

    method: str
    path: str
    host: str  # the Host header: which host the client believed it was contacting
    summary: str
    status: int
    received_at: float
    body: Any = None  # the decoded JSON body, if any
    headers: dict[str, str] = field(default_factory=dict)  # names in lower case

    @property
    def x_api_key(self) -> str | None:
        """The `x-api-key` header as received (Anthropic's key), if any."""
        return self.headers.get("x-api-key")

    @property
    def authorization(self) -> str | None:
        """The `authorization` header as received (OpenAI's `Bearer <key>`), if any."""
        return self.headers.get("authorization")


def decode_body(raw: bytes, encoding: str) -> bytes:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return raw
    if encoding == "gzip":
        return gzip.decompress(raw)
    if encoding == "deflate":
        return zlib.decompress(raw)
    raise ValueError(f"unsupported request content-encoding {encoding!r}")


class StandInServer:
    """Serve on 127.0.0.1 with an ephemeral port in a daemon thread; `stop()` ends it."""

    name: ClassVar[str] = "stand-in"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[Recorded] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- to override -----------------------------------------------------------------
    def handle(self, request: Request) -> tuple[Reply, str]:
        """The reply to `request` and a one-line summary to record."""
        raise NotImplementedError

    # -- life cycle ------------------------------------------------------------------
    def start(self) -> Self:
        owner: StandInServer = self

        class Handler(_Handler):
            server_owner = owner

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the stand-in is not running")
        return int(self._httpd.server_address[1])

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- records ---------------------------------------------------------------------
    def record(self, entry: Recorded) -> None:
        with self._lock:
            self._records.append(entry)

    def requests(self) -> list[Recorded]:
        """Every request so far, in arrival order."""
        with self._lock:
            return list(self._records)


class _Handler(BaseHTTPRequestHandler):
    server_owner: ClassVar[StandInServer]
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return  # the records are the log

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            total = 0
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                total += size
                if total > MAX_BODY_BYTES:
                    raise ValueError("request body too large")
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            raw = b"".join(parts)
        else:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                raise ValueError("request body too large")
            raw = self.rfile.read(length) if length else b""
        return decode_body(raw, self.headers.get("Content-Encoding", ""))

    def _serve(self) -> None:
        owner = self.server_owner
        received = time.time()
        try:
            body = self._read_body()
        except (ValueError, OSError) as exc:
            headers = {k.lower(): v for k, v in self.headers.items()}
            self._send(Reply(400, {"error": {"type": "bad_request", "message": str(exc)}}))
            owner.record(
                Recorded(
                    self.command,
                    self.path,
                    headers.get("host", ""),
                    f"unreadable: {exc}",
                    400,
                    received,
                    headers=headers,
                )
            )
            return
        request = Request(
            self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body, received
        )
        try:
            reply, summary = owner.handle(request)
        except Exception as exc:  # a stand-in bug: answer 500 and keep it on record
            reply = Reply(500, {"error": {"type": "stand_in_error", "message": repr(exc)}})
            summary = f"stand-in error: {exc!r}"
        owner.record(
            Recorded(
                request.method,
                request.path,
                request.headers.get("host", ""),
                summary,
                reply.status,
                received,
                request.json(),
                request.headers,
            )
        )
        self._send(reply, head=request.method == "HEAD")

    def _send(self, reply: Reply, *, head: bool = False) -> None:
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if reply.events is not None and not head:
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for index, event in enumerate(reply.events):
                data = event.encode()
                if reply.cut is not None and index == reply.cut.event:
                    data = data[: reply.cut.keep]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
                if reply.cut is not None and index == reply.cut.event:
                    self.close_connection = True  # no final chunk: the stream is broken
                    return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        payload = b"" if reply.document is None else json.dumps(reply.document).encode()
        if reply.document is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if not head:
            if reply.cut is not None:
                self.wfile.write(payload[: reply.cut.keep])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(payload)
        self.wfile.flush()

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_HEAD(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def do_OPTIONS(self) -> None:
        self._serve()


@dataclass(frozen=True)
class Usage:
    """The usage one answer reported, in the provider's own terms.

    Anthropic: `input_tokens` is the uncached input only (the prompt is input + cache
    read + cache write); `cache_write_tokens` is `cache_creation_input_tokens`,
    `cache_read_tokens` is `cache_read_input_tokens`, `reasoning_tokens` is 0.
    OpenAI: `input_tokens` includes the cached tokens, `cache_read_tokens` is
    `input_tokens_details.cached_tokens`, `cache_write_tokens` is always 0 (the API has no
    such figure), and `output_tokens` includes `reasoning_tokens`
    (`output_tokens_details.reasoning_tokens`).
    `server_tool_uses` counts web searches (Anthropic
    `server_tool_use.web_search_requests`; OpenAI `web_search_call` output items).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    server_tool_uses: int = 0


Outcome = Literal["answered", "cut", "error"]


@dataclass(frozen=True)
class LedgerEntry:
    """What the stand-in answered one generation request.

    `usage` is what reached the client: for a complete answer the figures its stream
    (or JSON body) carried; for a cut stream the figures in the events sent whole before
    the cut (None when none carried usage, as for a cut JSON body); None for an error.
    `model` is the model the answer named, None for an error (its body names none).
    """

    number: int  # the generation request's number: 1, 2, 3, ... in arrival order
    path: str
    requested_model: str | None
    model: str | None
    status: int
    stream: bool
    outcome: Outcome
    usage: Usage | None


@dataclass(frozen=True)
class UsageTotals:
    """Sums over ledger entries; `requests` counts those whose answer reported usage."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    server_tool_uses: int = 0

    def plus(self, usage: Usage) -> UsageTotals:
        return UsageTotals(
            self.requests + 1,
            self.input_tokens + usage.input_tokens,
            self.output_tokens + usage.output_tokens,
            self.cache_read_tokens + usage.cache_read_tokens,
            self.cache_write_tokens + usage.cache_write_tokens,
            self.reasoning_tokens + usage.reasoning_tokens,
            self.server_tool_uses + usage.server_tool_uses,
        )


@dataclass(frozen=True)
class LedgerTotals:
    overall: UsageTotals
    by_model: dict[str, UsageTotals]  # keyed by the model the answers named


@dataclass(frozen=True)
class Admission:
    """What one generation request is answered with, fixed when it arrives."""

    number: int
    answer_model: str | None
    web_search_requests: int


@dataclass(frozen=True)
class Answer:
    """A provider's normal answer to one generation request."""

    reply: Reply
    summary: str
    model: str  # the model the answer names
    final_usage_event: int  # the stream event holding the final usage: where a cut falls


@dataclass(frozen=True)
class _Fault:
    kind: Literal["rate_limit", "overloaded"]
    retry_after_s: int | None


class ScriptedStandIn(StandInServer):
    """A provider whose model is the scripted mailbox driver, with its own id counter,
    a ledger of the usage it reported, and scriptable faults.

    `answer_model`: None, every answer names the requested model; else it names this one.
    `web_search_requests`: how many server-side web searches each answer reports (0: none).
    Both are read once per request, when it arrives, and may be changed at any time.
    `think_s`: how long each generation request waits before its answer goes out, as a
    real model's would (each request has a thread of its own: waits overlap).
    `steady_usage`: each answer reports its own request's size and a few cached tokens,
    not figures that grow with the request's number (which tell tests' answers apart but,
    with a hundred agents on one stand-in, tell an agent its context is full).
    """

    generation_route: ClassVar[str] = ""  # the POST route that generates
    # The agent's shell refuses `$(...)` and backquotes: the driver writes commands without.
    substitution_free: ClassVar[bool] = False

    def __init__(
        self,
        settings: DriverSettings | None = None,
        *,
        answer_model: str | None = None,
        web_search_requests: int = 0,
        think_s: float = 0.0,
        steady_usage: bool = False,
    ) -> None:
        super().__init__()
        self.think_s = think_s
        self.steady_usage = steady_usage
        self.settings = settings or DriverSettings()
        if self.substitution_free:
            self.settings = replace(self.settings, substitution_free=True)
        self.answer_model = answer_model
        self.web_search_requests = web_search_requests
        self._ids = itertools.count(1)
        self._state = threading.Lock()
        self._generations = 0
        self._ledger: list[LedgerEntry] = []
        self._rate_limited_left = 0
        self._rate_limit_retry_after = 1
        self._overloaded_until: float | None = None
        self._overload_retry_after: int | None = None
        self._cuts: dict[int, tuple[int | None, int | None]] = {}

    def usage_number(self, admission: Admission) -> int:
        """The number an answer's usage figures vary by (0: steady)."""
        return 0 if self.steady_usage else admission.number

    def root(self, request: Request) -> tuple[Reply, str] | None:
        """The answer to a probe of the server's root (`HEAD /`), else None."""
        if request.method in ("HEAD", "GET") and request.route.rstrip("/") == "":
            return Reply(200), "root"
        return None

    # -- provider hooks --------------------------------------------------------------
    def requested_model(self, request: Request, body: Any) -> str | None:
        """The model a generation request asks for (the body's `model`)."""
        return str(body["model"]) if isinstance(body, dict) and "model" in body else None

    def streamed(self, request: Request, body: Any) -> bool:
        """Whether a generation request asks for a stream (the body's `stream`)."""
        return bool(body.get("stream")) if isinstance(body, dict) else False

    def answer(self, request: Request, body: dict[str, Any], admission: Admission) -> Answer:
        """The normal answer to a generation request whose body is a JSON object."""
        raise NotImplementedError

    def invalid(self, message: str) -> Reply:
        """A 400 in the provider's error shape."""
        raise NotImplementedError

    def rate_limited(self, retry_after_s: int) -> Reply:
        """A 429 in the provider's error shape, with `retry-after`."""
        raise NotImplementedError

    def overloaded(self, retry_after_s: int | None) -> Reply:
        """The provider's overloaded status and error shape."""
        raise NotImplementedError

    def stream_usage(self, events: Sequence[SseEvent]) -> Usage | None:
        """The usage `events` report, read as a client reads them; None if none."""
        raise NotImplementedError

    def document_usage(self, document: Any) -> Usage | None:
        """The usage a non-streamed answer reports; None if none."""
        raise NotImplementedError

    # -- faults (thread-safe) --------------------------------------------------------
    def rate_limit(self, count: int, *, retry_after_s: int = 1) -> None:
        """Answer the next `count` generation requests 429 with `retry-after:
        retry_after_s`, then normally (replaces any count still pending; 0 cancels)."""
        if count < 0 or retry_after_s < 0:
            raise ValueError("count and retry_after_s must not be negative")
        with self._state:
            self._rate_limited_left = count
            self._rate_limit_retry_after = retry_after_s

    def overload(self, seconds: float | None = None, *, retry_after_s: int | None = None) -> None:
        """Answer every generation request with the overloaded status (Anthropic 529
        `overloaded_error`, OpenAI 503) for `seconds` from now; None: until
        `end_overload()`. With `retry_after_s`, the answers carry `retry-after`."""
        if seconds is not None and seconds < 0:
            raise ValueError("seconds must not be negative")
        with self._state:
            self._overloaded_until = math.inf if seconds is None else time.monotonic() + seconds
            self._overload_retry_after = retry_after_s

    def end_overload(self) -> None:
        with self._state:
            self._overloaded_until = None

    def cut_stream(
        self, request_number: int, *, event: int | None = None, keep_bytes: int | None = None
    ) -> None:
        """Break off the answer to generation request `request_number` (1-based).

        A stream sends its events before `event` whole (None: the event holding the
        final usage, Anthropic `message_delta`, OpenAI `response.completed`; negative
        counts from the end), then `keep_bytes` of that event (None: half; at least 1,
        never all), then closes the connection without the final chunk. A non-streamed
        answer sends its full Content-Length but only `keep_bytes` (None: half) of its
        body. If that request is answered with an error, nothing is cut."""
        if request_number < 1:
            raise ValueError("request numbers start at 1")
        with self._state:
            self._cuts[request_number] = (event, keep_bytes)

    def clear_faults(self) -> None:
        """No pending rate limit, overload or cut."""
        with self._state:
            self._rate_limited_left = 0
            self._overloaded_until = None
            self._cuts.clear()

    # -- the ledger ------------------------------------------------------------------
    @property
    def generation_requests(self) -> int:
        """How many generation requests arrived (answered, cut or refused)."""
        with self._state:
            return self._generations

    def ledger(self) -> list[LedgerEntry]:
        """One entry per generation request, by request number."""
        with self._state:
            return sorted(self._ledger, key=lambda entry: entry.number)

    def answered(self) -> list[LedgerEntry]:
        """Complete answers (status 200, not cut)."""
        return [e for e in self.ledger() if e.outcome == "answered"]

    def cut_answers(self) -> list[LedgerEntry]:
        return [e for e in self.ledger() if e.outcome == "cut"]

    def error_answers(self) -> list[LedgerEntry]:
        """Generation requests answered with an error status (faults, invalid bodies)."""
        return [e for e in self.ledger() if e.outcome == "error"]

    def usage_totals(self, *, include_cut: bool = False) -> LedgerTotals:
        """The reported usage summed per answering model and overall: over complete
        answers, and with `include_cut` also over what cut answers had sent."""
        overall = UsageTotals()
        by_model: dict[str, UsageTotals] = {}
        for entry in self.ledger():
            counted = entry.outcome == "answered" or (include_cut and entry.outcome == "cut")
            if not counted or entry.usage is None or entry.model is None:
                continue
            overall = overall.plus(entry.usage)
            by_model[entry.model] = by_model.get(entry.model, UsageTotals()).plus(entry.usage)
        return LedgerTotals(overall, by_model)

    # -- answering -------------------------------------------------------------------
    def generate(self, request: Request) -> tuple[Reply, str]:
        """Answer one generation request: a scripted fault, or the provider's answer
        (cut if scripted), and enter it in the ledger."""
        body = request.json()
        requested = self.requested_model(request, body)
        stream = self.streamed(request, body)
        with self._state:
            self._generations += 1
            admission = Admission(self._generations, self.answer_model, self.web_search_requests)
            fault = self._fault()
            cut = self._cuts.pop(admission.number, None) if fault is None else None
        number = admission.number
        if fault is not None or not isinstance(body, dict):
            if fault is None:
                reply, what = self.invalid("the body is not a JSON object"), "invalid"
            elif fault.kind == "rate_limit":
                reply, what = self.rate_limited(fault.retry_after_s or 0), "rate limited"
            else:
                reply, what = self.overloaded(fault.retry_after_s), "overloaded"
            self._enter(
                LedgerEntry(
                    number, request.path, requested, None, reply.status, stream, "error", None
                )
            )
            return reply, f"error {reply.status} {what} #{number}"
        if self.think_s > 0:
            time.sleep(self.think_s)  # a fault or a refusal comes at once; an answer thinks
        try:
            answer = self.answer(request, body, admission)
        except Exception:  # a stand-in bug: the server answers 500, kept here too
            self._enter(
                LedgerEntry(number, request.path, requested, None, 500, stream, "error", None)
            )
            raise
        reply = answer.reply
        if reply.events is not None:
            usage = self.stream_usage(reply.events)
        else:
            usage = self.document_usage(reply.document)
        outcome: Outcome = "answered"
        summary = f"{answer.summary} #{number}"
        if cut is not None:
            reply, usage = self._cut(reply, cut, answer.final_usage_event)
            outcome = "cut"
            if reply.events is not None and reply.cut is not None:
                summary += f" cut in event {reply.cut.event}"
            else:
                summary += " cut in body"
        self._enter(
            LedgerEntry(
                number, request.path, requested, answer.model, reply.status, stream, outcome, usage
            )
        )
        return reply, summary

    def _fault(self) -> _Fault | None:
        """The fault the request now arriving meets, if any (the lock held)."""
        if self._overloaded_until is not None:
            if time.monotonic() < self._overloaded_until:
                return _Fault("overloaded", self._overload_retry_after)
            self._overloaded_until = None
        if self._rate_limited_left > 0:
            self._rate_limited_left -= 1
            return _Fault("rate_limit", self._rate_limit_retry_after)
        return None

    def _cut(
        self, reply: Reply, cut: tuple[int | None, int | None], final_usage_event: int
    ) -> tuple[Reply, Usage | None]:
        event, keep = cut
        if reply.events is None:
            size = len(json.dumps(reply.document).encode()) if reply.document is not None else 0
            kept = _part(size, keep)
            return replace(reply, cut=Cut(0, kept)), None
        events = list(reply.events)
        index = final_usage_event if event is None else event
        if index < 0:
            index += len(events)
        index = min(max(index, 0), len(events) - 1)
        kept = _part(len(events[index].encode()), keep)
        return replace(reply, cut=Cut(index, kept)), self.stream_usage(events[:index])

    def _enter(self, entry: LedgerEntry) -> None:
        with self._state:
            self._ledger.append(entry)


def _part(size: int, keep: int | None) -> int:
    """Bytes to keep of `size`: `keep` (None: half), at least 1 and fewer than all."""
    wanted = size // 2 if keep is None else keep
    return max(0, min(max(wanted, 1), size - 1))


def approximate_tokens(body: bytes) -> int:
    """A token count stand-in: about four bytes a token."""
    return max(1, len(body) // 4)


def varied_usage(number: int, prompt_tokens: int, content_tokens: int, searches: int) -> Usage:
    """The usage of generation request `number` where the input counts its cached tokens
    and the output its reasoning (OpenAI, Gemini): cached = even_only(number), input =
    prompt_tokens + number + cached, reasoning = two_in_three(number), output =
    content_tokens + number + reasoning; web searches as asked."""
    cached = even_only(number)
    reasoning = two_in_three(number)
    return Usage(
        input_tokens=prompt_tokens + number + cached,
        output_tokens=content_tokens + number + reasoning,
        cache_read_tokens=cached,
        reasoning_tokens=reasoning,
        server_tool_uses=searches,
    )


def two_in_three(number: int) -> int:
    """A figure for generation request `number`: 0 when number % 3 == 1 (requests 1, 4,
    7, ...), else 64 * number + 3."""
    return 0 if number % 3 == 1 else 64 * number + 3


def even_only(number: int) -> int:
    """A figure for generation request `number`: 0 when it is odd, else 512 * number + 5."""
    return 0 if number % 2 else 512 * number + 5


def new_id(prefix: str, counter: int, now: float | None = None) -> str:
    stamp = int((now if now is not None else time.time()) * 1000)
    return f"{prefix}{stamp:x}{counter:06x}"


def summarize_tools(tools: Any) -> list[str]:
    """The tool names a request declares (any provider's shape)."""
    names: list[str] = []
    if isinstance(tools, list):
        for tool in tools:
            if isinstance(tool, dict):
                name = tool.get("name") or (tool.get("function") or {}).get("name")
                names.append(str(name or tool.get("type", "?")))
    return names
