"""A hostile actor for the provider gateway (standard library only, run in the sandbox).

It tries what an agent with a shell could try, prints one JSON line per attempt on
stdout, answers the episode's first observation with `stop`, and after `closed.json`
tries once more. argv: ENDPOINT HOST_PORT (a server on the host's loopback).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request

ENDPOINT, HOST_PORT = sys.argv[1], int(sys.argv[2])
TOKEN = os.environ.get("ANTHROPIC_API_KEY", "")
BASE = os.environ.get("ANTHROPIC_BASE_URL", "")
BODY = {"model": "probe-model", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}


def say(attempt: str, **fields: object) -> None:
    print(json.dumps({"attempt": attempt, **fields}), flush=True)


def call(path: str, *, token: str = TOKEN, body: bytes | None = None, method: str = "POST") -> int:
    data = json.dumps(BODY).encode() if body is None and method == "POST" else body
    request = urllib.request.Request(BASE + path, data=data, method=method)
    request.add_header("x-api-key", token)
    request.add_header("anthropic-version", "2023-06-01")
    request.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        exc.read()
        return int(exc.code)
    except (OSError, urllib.error.URLError) as exc:
        return -1 if "reset" not in str(exc).lower() else -2


def namespace() -> dict[str, object]:
    with open("/proc/net/dev") as dev:
        interfaces = sorted(line.split(":")[0].strip() for line in dev.readlines()[2:])
    with open("/proc/net/route") as routes:
        ipv4_routes = len(routes.readlines()[1:])
    ipv6_routes = 0
    try:
        with open("/proc/net/ipv6_route") as routes:
            ipv6_routes = sum(1 for line in routes if line.split()[-1] != "lo")
    except OSError:
        pass
    return {"interfaces": interfaces, "ipv4_routes": ipv4_routes, "ipv6_routes": ipv6_routes}


def host_loopback() -> str:
    try:
        with socket.create_connection(("127.0.0.1", HOST_PORT), timeout=5):
            return "connected"
    except OSError as exc:
        return type(exc).__name__


def dns() -> str:
    try:
        socket.getaddrinfo("example.com", 443)
        return "resolved"
    except OSError as exc:
        return type(exc).__name__


say("environment", values=dict(os.environ))  # kept in its stdout log: searched for the key
say("token", status=call("/v1/messages"))
say("wrong_token", status=call("/v1/messages", token="sk-not-the-token"))
say("route", status=call("/v1/complete"))
say("route_get", status=call("/v1/files", method="GET"))
say("huge_body", status=call("/v1/messages", body=b"x" * (200 << 10)))
say("namespace", **namespace())
say("host_loopback", result=host_loopback())
say("dns", result=dns())

outbox = os.path.join(ENDPOINT, "outbox")
deadline = time.monotonic() + 60
while not os.path.exists(os.path.join(outbox, "obs-1.json")) and time.monotonic() < deadline:
    time.sleep(0.05)
with open(os.path.join(outbox, "obs-1.json")) as handle:
    observation = json.load(handle)
answer = {"schema": "mailroom.response/v1", "request_id": observation["request_id"]}
answer["decision"] = "stop"
temporary = os.path.join(ENDPOINT, "inbox", ".resp-1.json.tmp")
with open(temporary, "w") as handle:
    json.dump(answer, handle)
os.replace(temporary, os.path.join(ENDPOINT, "inbox", "resp-1.json"))
while not os.path.exists(os.path.join(outbox, "closed.json")) and time.monotonic() < deadline:
    time.sleep(0.05)
say("after_close", status=call("/v1/messages"))
