"""How an episode ends when its provider, through the gateway, does not simply answer:
real sandboxes, the real launcher and watchdog loop (the simulator-free fake), the
worker's real gateway and a stand-in provider on the host's 127.0.0.1 scripted to fail.

- 429 then 200: metered, the episode goes on and ends by the actor's own stop;
- the provider overloaded (529) for longer than the response timeout: the silent actor's
  episode is an infrastructure error, `provider_unavailable`, with the evidence, and an
  actor that exits after its retries likewise; with a healthy provider the same silence
  is the actor's own timeout;
- a declared budget (requests, or tokens) spent: refused, and the episode is truncated
  `provider_budget`, a failure of the method, not an error.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import copied_actor
from mailroom.orchestrator.actors.confinement import ConfinementSettings
from mailroom.orchestrator.actors.launcher import ProviderAccess, process_launcher
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.episode.blinded import run_blinded_episode
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.perf.provider_standin.anthropic_standin import AnthropicStandIn
from mailroom.orchestrator.records.provider import ProviderBudgets, ProviderDeclaration
from mailroom.orchestrator.records.result import EpisodeResult, ProviderUsage
from mailroom.orchestrator.sim.fake import FakeSimulator

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="an actor's network namespace needs root (these machines have it)"
)

KEY = "sk-real-key-for-the-endings-test"
DECLARATION = ProviderDeclaration(
    kind="anthropic",
    key_variable="ANTHROPIC_API_KEY",
    base_url_variable="ANTHROPIC_BASE_URL",
    routes=["POST /v1/messages"],
)
RESPONSE_TIMEOUT_S = 6.0


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[AnthropicStandIn]:
    with AnthropicStandIn() as standin:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", standin.origin)
        yield standin


def _episode(
    mode: str,
    mailbox_root: Path,
    tmp_path: Path,
    declaration: ProviderDeclaration = DECLARATION,
) -> EpisodeResult:
    run_dir = tmp_path / "run"
    launcher = process_launcher(
        [
            "{python}",
            str(copied_actor(tmp_path / "a", "gateway_client_actor.py")),
            "{endpoint}",
            mode,
        ],
        ActorLimits(exit_window_s=5),
        confinement=ConfinementSettings(mode="sandbox", network="gateway"),
        run_dir=run_dir,
        mailbox_root=mailbox_root,
        provider=ProviderAccess(declaration, "claude-haiku-4-5"),
    )
    settings = RunSettings(
        max_policy_calls=3, replan_interval=1, response_timeout_s=RESPONSE_TIMEOUT_S
    )
    return run_blinded_episode(
        Case(suite="libero_10", task_index=0, init_state_index=0, seed=3),
        attempt=1,
        settings=settings,
        adapter=FakeSimulator(control_cap=settings.control_cap(520)),
        run_dir=run_dir,
        mailbox_root=mailbox_root,
        launch_actor=launcher,
        record="minimal",
    )


def _usage(result: EpisodeResult) -> ProviderUsage:
    assert isinstance(result.usage, ProviderUsage), result.usage
    return result.usage


def test_a_rate_limit_then_an_answer_is_metered_and_the_episode_goes_on(
    provider: AnthropicStandIn, mailbox_root: Path, tmp_path: Path
) -> None:
    provider.rate_limit(1)
    result = _episode("answer", mailbox_root, tmp_path)
    assert (result.outcome, result.termination) == ("failure", "actor_stop"), result.errors
    usage = _usage(result)
    assert (usage.provider_requests, usage.failed_requests) == (2, 1)
    assert usage.models[0].requests == 1 and usage.model_verified is True


def test_an_overloaded_provider_is_the_infrastructures_error_not_the_actors(
    provider: AnthropicStandIn, mailbox_root: Path, tmp_path: Path
) -> None:
    provider.overload()  # every generation answers 529 until ended
    silent = _episode("silent", mailbox_root, tmp_path / "silent")
    exited = _episode("exit", mailbox_root, tmp_path / "exit")
    provider.end_overload()
    for result in (silent, exited):
        assert (result.outcome, result.termination) == ("error", "infrastructure_error")
        (error,) = result.errors
        assert error.kind == "infrastructure_error" and error.code == "provider_unavailable"
        assert "overloaded (529)" in error.message and "decision 1" in error.message
        usage = _usage(result)
        assert usage.failed_requests == usage.provider_requests >= 1
    # The same silence with a provider that answers is the actor's own timeout.
    healthy = _episode("silent", mailbox_root, tmp_path / "healthy")
    assert healthy.termination == "actor_timeout"
    assert healthy.errors[0].code == "response_deadline_missed"


@pytest.mark.parametrize(
    "budgets",
    [ProviderBudgets(requests=3), ProviderBudgets(input_tokens=1)],
    ids=["requests", "input_tokens"],
)
def test_a_spent_budget_truncates_the_episode(
    budgets: ProviderBudgets, provider: AnthropicStandIn, mailbox_root: Path, tmp_path: Path
) -> None:
    declaration = DECLARATION.model_copy(update={"budgets": budgets})
    result = _episode("spend", mailbox_root, tmp_path, declaration)
    assert (result.outcome, result.truncated, result.truncation) == (
        "failure",
        True,
        "provider_budget",
    )
    assert result.errors == [] and result.termination is None
    usage = _usage(result)
    assert usage.refused_requests >= 1
    expected = 3 if budgets.requests is not None else 1
    assert usage.provider_requests == expected == len(provider.requests())
