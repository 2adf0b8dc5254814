"""A scripted actor in a thread that speaks the mailbox protocol through real files.

Used where a test needs exact control over each response; the files it writes are
real and are found by the real watcher.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mailroom.orchestrator.actors.confinement import ConfinementSettings
from mailroom.orchestrator.actors.outer_identity import OuterIdentity

# Returns a response document (dict), raw bytes, or None to stay silent.
Script = Callable[[dict[str, Any]], dict[str, Any] | bytes | None]


def act(observation: dict[str, Any], actions: list[list[float]]) -> dict[str, Any]:
    return {
        "schema": "mailroom.response/v1",
        "request_id": observation["request_id"],
        "decision": "act",
        "actions": actions,
    }


def stop(observation: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema": "mailroom.response/v1",
        "request_id": observation["request_id"],
        "decision": "stop",
    }


class ThreadActor:
    def __init__(self, endpoint: Path, script: Script, give_up_s: float = 120.0) -> None:
        self.endpoint = endpoint
        self.script = script
        self.give_up_s = give_up_s
        self.observations: list[dict[str, Any]] = []
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ThreadActor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def description(self) -> dict[str, object]:
        return {"kind": "thread", "endpoint": str(self.endpoint)}

    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop_details(self) -> dict[str, object]:
        return {}

    def stop(self) -> int | None:
        self._halt.set()
        self._thread.join(timeout=10)
        return None

    def _run(self) -> None:
        outbox = self.endpoint / "outbox"
        sequence = 1
        deadline = time.monotonic() + self.give_up_s
        while not self._halt.is_set() and time.monotonic() < deadline:
            obs_file = outbox / f"obs-{sequence}.json"
            if not obs_file.exists():
                if (outbox / "closed.json").exists():
                    return
                time.sleep(0.005)
                continue
            observation = json.loads(obs_file.read_text(encoding="utf-8"))
            self.observations.append(observation)
            answer = self.script(observation)
            if answer is not None:
                data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                final = self.endpoint / observation["response_file"]
                tmp = final.with_name(f".{final.name}.tmp")
                tmp.write_bytes(data)
                os.replace(tmp, final)
            sequence += 1


class ThreadLauncher:
    """An `ActorLauncher` that starts a ThreadActor on the endpoint and remembers it.

    A thread of the test process is not confined: its attempts record `none`.
    """

    confinement = ConfinementSettings(mode="none")

    def __init__(self, script: Script, started: list[ThreadActor]) -> None:
        self.script = script
        self.started = started

    def identity(self) -> OuterIdentity:
        return OuterIdentity(None, None)

    def start(
        self,
        endpoint: Any,
        instructions: str,
        identity: OuterIdentity,
        output_files: Mapping[str, Path] | None,
    ) -> ThreadActor:
        actor = ThreadActor(endpoint.root, self.script).__enter__()
        self.started.append(actor)
        return actor


def thread_launcher(script: Script, started: list[ThreadActor]) -> ThreadLauncher:
    return ThreadLauncher(script, started)
