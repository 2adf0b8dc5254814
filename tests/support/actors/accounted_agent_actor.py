"""An agent-like actor that prints its own account of its work as Claude Code does
(`claude -p --output-format stream-json --verbose`: one JSON event a line), standard
library only.

argv: ENDPOINT. For each observation it reads the document (a Bash tool call naming
`outbox/obs-<n>.json` by its absolute path, whose result is the document's first
characters), asks its provider once through the gateway with the token it was handed,
thinks, says something an HTML page must not run, and answers with a chunk of two small
actions (a Bash tool call naming `inbox/resp-<n>.json`). After `closed.json` it prints
the session's final result.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

from actor_mailbox import answer, observations

ENDPOINT = Path(sys.argv[1])
BODY = json.dumps(
    {"model": "claude-haiku-4-5", "max_tokens": 8, "messages": [{"role": "user", "content": "?"}]}
).encode()
calls = 0


def event(record: dict[str, object]) -> None:
    print(json.dumps(record), flush=True)


def assistant(*blocks: dict[str, object]) -> None:
    event({"type": "assistant", "message": {"role": "assistant", "content": list(blocks)}})


def bash(command: str, output: str, is_error: bool = False) -> None:
    global calls
    calls += 1
    call_id = f"toolu_{calls:04d}"
    assistant({"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command}})
    result = {
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": output,
        "is_error": is_error,
    }
    event({"type": "user", "message": {"role": "user", "content": [result]}})


def ask() -> int:
    request = urllib.request.Request(
        os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", data=BODY, method="POST"
    )
    request.add_header("x-api-key", os.environ["ANTHROPIC_API_KEY"])
    request.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        exc.read()
        return int(exc.code)


event({"type": "system", "subtype": "init", "model": "claude-haiku-4-5", "tools": ["Bash"]})
assistant({"type": "text", "text": "I will wait for the first observation."})
for sequence, observation in observations(ENDPOINT):
    document = (ENDPOINT / "outbox" / f"obs-{sequence}.json").read_text()
    bash(f"cat {ENDPOINT}/outbox/obs-{sequence}.json", document[:120])
    status = ask()
    assistant({"type": "thinking", "thinking": f"The provider said {status}.", "signature": "x"})
    assistant({"type": "text", "text": "<script>alert('account')</script> \x1b[31mred\x1b[0m"})
    bash(f"mv inbox/.resp-{sequence}.json.tmp inbox/resp-{sequence}.json", "")
    answer(ENDPOINT, observation, {"decision": "act", "actions": [[0.1] * 6 + [-1.0]] * 2})
event({"type": "result", "subtype": "success", "is_error": False, "result": "the episode ended"})
