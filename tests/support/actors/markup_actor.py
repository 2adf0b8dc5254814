#!/usr/bin/env python3
"""Test actor whose words are markup (argv: ENDPOINT): a viewer must show them as text.

Call 1: a valid chunk whose note carries a script element and an `onerror=` attribute.
Call 2: an invalid response (an action outside [-1, 1]) carrying the same markup.
Call 3: another valid chunk; call 4: stop, on the task whose instruction names the
alphabet soup; on any other task it goes on acting until the episode is closed. It
prints the markup to stdout and stderr.
Standard library only: it runs inside the sandbox.
"""

from __future__ import annotations

import sys
from pathlib import Path

from actor_mailbox import answer, observations

MARKUP = (
    '<script>window.__pwned = "script"</script><img src="x" onerror="window.__pwned = \'onerror\'">'
)


def main() -> int:
    endpoint = Path(sys.argv[1])
    print(MARKUP, flush=True)
    print(MARKUP, file=sys.stderr, flush=True)
    chunk = [[0.0, 0.0, 0.05, 0.0, 0.0, 0.0, -1.0]] * 5
    bodies: list[dict[str, object]] = [
        {"decision": "act", "actions": chunk, "note": MARKUP},
        {"decision": "act", "actions": [[2.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0]], "note": MARKUP},
        {"decision": "act", "actions": chunk},
        {"decision": "stop"},
    ]
    for sequence, observation in observations(endpoint):
        stops = "alphabet" in str(observation.get("instruction", ""))
        body = bodies[sequence - 1] if sequence <= len(bodies) else bodies[2]
        if body["decision"] == "stop" and not stops:
            body = bodies[2]
        answer(endpoint, observation, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
