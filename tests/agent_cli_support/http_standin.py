"""A stand-in model provider on 127.0.0.1: a threaded HTTP server that records requests.

Subclasses answer each request with `Reply` (a JSON document, a server-sent event
stream, or an empty status). Streams go out with chunked transfer encoding, one chunk
per event, like a real provider's.
"""

from __future__ import annotations

import gzip
import itertools
import json
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import urlsplit

from .driver import DriverSettings

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
        return f"event: {self.name}\ndata: {json.dumps(self.data)}\n\n".encode()


@dataclass(frozen=True)
class Reply:
    status: int = 200
    document: Any = None  # a JSON body, when not None
    events: Sequence[SseEvent] | None = None  # a server-sent event stream, when not None
    headers: dict[str, str] = field(default_factory=dict)


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
    def start(self) -> StandInServer:
        owner = self

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

    def __enter__(self) -> StandInServer:
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
            self._send(Reply(400, {"error": {"type": "bad_request", "message": str(exc)}}))
            owner.record(Recorded(self.command, self.path, "", f"unreadable: {exc}", 400, received))
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
            for event in reply.events:
                data = event.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        payload = b"" if reply.document is None else json.dumps(reply.document).encode()
        if reply.document is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if not head:
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


class ScriptedStandIn(StandInServer):
    """A provider whose model is the scripted mailbox driver, with its own id counter."""

    def __init__(self, settings: DriverSettings | None = None) -> None:
        super().__init__()
        self.settings = settings or DriverSettings()
        self._ids = itertools.count(1)

    def root(self, request: Request) -> tuple[Reply, str] | None:
        """The answer to a probe of the server's root (`HEAD /`), else None."""
        if request.method in ("HEAD", "GET") and request.route.rstrip("/") == "":
            return Reply(200), "root"
        return None


def approximate_tokens(body: bytes) -> int:
    """A token count stand-in: about four bytes a token."""
    return max(1, len(body) // 4)


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
