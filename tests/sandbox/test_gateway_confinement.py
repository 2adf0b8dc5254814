"""The provider gateway as a hostile actor meets it: a real sandbox, the real launcher, the
real watchdog loop (the simulator-free fake) and the worker's real gateway, forwarding to a
stand-in provider on the host's 127.0.0.1.

Inside its own network namespace the actor has only its loopback: its handed token works
through the gateway, and a wrong token, an undeclared route, a body past the declared
size and a request after `closed.json` are refused in the provider's error shape and
recorded, never forwarded. The host's loopback services (the stand-in itself) and DNS are
unreachable; that nothing else is reachable is read off the namespace (no interface but
`lo`, no route), never by sending a packet. The real key reaches the stand-in on the one
forwarded request and is nowhere in the run directory, the endpoint or the actor's
environment; the token never reaches the provider.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import copied_actor
from mailroom.orchestrator.actors.actor_network import actor_networks
from mailroom.orchestrator.actors.confinement import ConfinementSettings
from mailroom.orchestrator.actors.launcher import ProviderAccess, process_launcher
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.episode.blinded import run_blinded_episode
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.perf.provider_standin.anthropic_standin import AnthropicStandIn
from mailroom.orchestrator.records.layout import RunPaths
from mailroom.orchestrator.records.provider import ProviderDeclaration
from mailroom.orchestrator.sim.fake import FakeSimulator
from recorded_events import attempt_events

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="an actor's network namespace needs root (these machines have it)"
)

KEY = "sk-real-key-for-the-gateway-test-0123456789"
DECLARATION = ProviderDeclaration(
    kind="anthropic",
    key_variable="ANTHROPIC_API_KEY",
    base_url_variable="ANTHROPIC_BASE_URL",
    routes=["POST /v1/messages", "GET /v1/models"],
    max_request_bytes=64 << 10,
)


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[AnthropicStandIn]:
    with AnthropicStandIn() as standin:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", standin.origin)
        yield standin


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def _files_holding(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_this_machine_gives_each_actor_a_network_namespace() -> None:
    assert actor_networks() is None


def test_a_hostile_actor_reaches_its_provider_only_with_its_token(
    provider: AnthropicStandIn, mailbox_root: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    launcher = process_launcher(
        [
            "{python}",
            str(copied_actor(tmp_path / "actors", "gateway_probe_actor.py")),
            "{endpoint}",
            str(provider.port),
        ],
        ActorLimits(exit_window_s=30),
        confinement=ConfinementSettings(mode="sandbox", network="gateway"),
        run_dir=run_dir,
        mailbox_root=mailbox_root,
        provider=ProviderAccess(DECLARATION, "probe-model"),
    )
    case = Case(suite="libero_10", task_index=0, init_state_index=0, seed=3)
    settings = RunSettings(max_policy_calls=3, replan_interval=1, response_timeout_s=120.0)
    result = run_blinded_episode(
        case,
        attempt=1,
        settings=settings,
        adapter=FakeSimulator(control_cap=settings.control_cap(520)),
        run_dir=run_dir,
        mailbox_root=mailbox_root,
        launch_actor=launcher,
        record="minimal",
    )
    attempt = RunPaths(run_dir).attempt(case.attempt_id(1))
    said = {line["attempt"]: line for line in _lines(attempt.actor_output["stdout"])}
    assert result.termination == "actor_stop", (result, attempt.actor_output["stderr"].read_text())

    # What the actor saw.
    assert said["token"]["status"] == 200
    assert said["wrong_token"]["status"] == 401
    assert said["route"]["status"] == 404 and said["route_get"]["status"] == 404
    assert said["huge_body"]["status"] in (413, -2)  # refused, or cut while it still sent
    assert said["after_close"]["status"] == 403
    namespace = {k: v for k, v in said["namespace"].items() if k != "attempt"}
    assert namespace == {"interfaces": ["lo"], "ipv4_routes": 0, "ipv6_routes": 0}
    assert said["host_loopback"]["result"] == "ConnectionRefusedError"
    assert said["dns"]["result"] == "gaierror"

    # What the gateway recorded: one forwarded request, every refusal with its reason.
    requests = _lines(attempt.provider_requests)
    forwarded = [r for r in requests if r["outcome"] != "refused"]
    refused = sorted(r["reason"] for r in requests if r["outcome"] == "refused")
    # Sent before the actor answered the first observation: decision 0 or 1 (whether
    # that observation was out yet).
    assert [(r["route"], r["status"]) for r in forwarded] == [("/v1/messages", 200)]
    assert forwarded[0]["decision"] in (0, 1)
    assert refused == ["episode_over", "route", "route", "size", "token"]
    assert all("body" not in r and "headers" not in r for r in requests)

    # What the provider saw: the real key on the one request that reached it.
    (seen,) = provider.requests()
    assert seen.headers.get("x-api-key") == KEY
    usage = result.usage.model_dump()
    assert usage["source"] == "gateway"
    assert usage["provider_requests"] == 1 and usage["refused_requests"] == 5
    assert usage["models"][0]["requests"] == 1

    # Its whole environment (printed into its kept stdout) holds the token, not the key.
    environment = said["environment"]["values"]
    assert KEY not in json.dumps(environment)
    assert environment["ANTHROPIC_API_KEY"].startswith("sk-episode-")
    assert set(environment) >= {"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "PATH", "HOME"}
    # The key is nowhere in the run or the endpoint; the token never left the evaluator.
    endpoint = Path(json.loads(attempt.endpoint_mapping.read_text())["endpoint"])
    assert _files_holding(run_dir, KEY.encode()) == []
    assert _files_holding(endpoint, KEY.encode()) == []
    (started,) = attempt_events(attempt.root, "actor_started")
    assert KEY not in json.dumps(started)
    assert started["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8787"
    assert started["env"]["ANTHROPIC_API_KEY"].startswith("<the episode's gateway token")
    assert started["network"]["namespace"] == "own"
    assert result.confinement is not None and result.confinement.network == "gateway"
