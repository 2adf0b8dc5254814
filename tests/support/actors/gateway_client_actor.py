"""An agent-like actor for the provider gateway's endings (standard library only).

argv: ENDPOINT MODE. Each observation it asks its provider (through the gateway, with the
token it was handed) until an answer comes, retrying a refused or failed request after a
short pause, as an agent CLI would; then, by MODE:
  answer   - answers `stop` to the first observation once its provider answered;
  silent   - asks, then never answers (its response deadline passes);
  exit     - asks until its provider answered or 20 tries failed, then exits;
  spend    - asks until the gateway refuses it, then never answers.
It prints one JSON line per request: its status.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request

ENDPOINT, MODE = sys.argv[1], sys.argv[2]
BODY = json.dumps(
    {"model": "claude-haiku-4-5", "max_tokens": 8, "messages": [{"role": "user", "content": "?"}]}
).encode()


def ask() -> int:
    request = urllib.request.Request(
        os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", data=BODY, method="POST"
    )
    request.add_header("x-api-key", os.environ["ANTHROPIC_API_KEY"])
    request.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()
            status = int(answer.status)
    except urllib.error.HTTPError as exc:
        exc.read()
        status = int(exc.code)
    except OSError:
        status = -1
    print(json.dumps({"status": status}), flush=True)
    return status


outbox = os.path.join(ENDPOINT, "outbox")
deadline = time.monotonic() + 120
while not os.path.exists(os.path.join(outbox, "obs-1.json")) and time.monotonic() < deadline:
    time.sleep(0.05)
tries = 0
while time.monotonic() < deadline:
    tries += 1
    status = ask()
    if status == 200 and MODE != "spend":
        break
    if MODE == "spend" and status != 200:
        break
    if MODE == "exit" and tries >= 20:
        sys.exit(3)
    time.sleep(0.05 if MODE == "spend" else 0.2)
if MODE == "answer":
    with open(os.path.join(outbox, "obs-1.json")) as handle:
        observation = json.load(handle)
    document = {"schema": "mailroom.response/v1", "request_id": observation["request_id"]}
    document["decision"] = "stop"
    temporary = os.path.join(ENDPOINT, "inbox", ".resp-1.json.tmp")
    with open(temporary, "w") as handle:
        json.dump(document, handle)
    os.replace(temporary, os.path.join(ENDPOINT, "inbox", "resp-1.json"))
if MODE == "exit":
    sys.exit(3)
while not os.path.exists(os.path.join(outbox, "closed.json")) and time.monotonic() < deadline:
    time.sleep(0.1)
