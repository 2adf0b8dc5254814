"""The mailbox loop the test actors share: wait for an observation (or the episode's
close), and answer it with a response written atomically under the name it asks for.

Standard library only: the actors run inside the sandbox. A sandbox is handed the one
file an actor's command names, never the folder beside it, so an actor is copied out
of the project with this module's code in place of its import (tests/conftest.py's
`copied_actor`): each copy is a standalone program. Run from this folder, an actor
imports it as it is.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

RESPONSE_SCHEMA = "mailroom.response/v1"


def wait_for(endpoint: Path, sequence: int, poll_s: float = 0.01) -> dict[str, object] | None:
    """Observation `sequence` once it is published, looked for every `poll_s` seconds at
    first, then less often the longer the wait (up to five times `poll_s`: a quick
    answer stays quick, a long wait costs a few polls a second); None if the episode is
    closed first."""
    obs = endpoint / "outbox" / f"obs-{sequence}.json"
    started = time.monotonic()
    while not obs.exists():
        if (endpoint / "outbox" / "closed.json").exists():
            return None
        waited = time.monotonic() - started
        time.sleep(min(5 * poll_s, max(poll_s, waited / 20)))
    document: dict[str, object] = json.loads(obs.read_text())
    return document


def observations(endpoint: Path, poll_s: float = 0.01) -> Iterator[tuple[int, dict[str, object]]]:
    """Each observation in turn with its sequence (from 1), until the episode is closed."""
    sequence = 1
    while (observation := wait_for(endpoint, sequence, poll_s)) is not None:
        yield sequence, observation
        sequence += 1


def write_response(endpoint: Path, observation: dict[str, object], text: str) -> None:
    """`text` as the response to `observation`: written beside the name it asks for,
    then renamed onto it."""
    final = endpoint / str(observation["response_file"])
    tmp = final.with_name(".tmp-" + final.name)
    tmp.write_text(text)
    os.replace(tmp, final)


def answer(endpoint: Path, observation: dict[str, object], body: dict[str, object]) -> None:
    """A response to `observation` holding `body` (its decision, actions, note)."""
    response = {"schema": RESPONSE_SCHEMA, "request_id": observation["request_id"], **body}
    write_response(endpoint, observation, json.dumps(response))
