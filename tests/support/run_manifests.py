"""Run manifests as a launch writes them, without a launch: a run of external actors, and
a run of sandboxed actors whose only route out is the provider gateway (`GATEWAY`,
forwarding to `UPSTREAM`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mailroom.orchestrator.actors.confinement import ConfinementSettings
from mailroom.orchestrator.actors.sandbox import SandboxTool
from mailroom.orchestrator.campaign.manifest import build_manifest
from mailroom.orchestrator.catalog.plans import Plan
from mailroom.orchestrator.episode.settings import RecordMode, RunSettings
from mailroom.orchestrator.families.plans import build_plan
from mailroom.orchestrator.families.registry import DEFAULT_BENCHMARK

GATEWAY: dict[str, Any] = {
    "provider": "anthropic",
    "routes": ["POST /v1/messages", "POST /v1/messages/count_tokens"],
    "key_variable": "ANTHROPIC_API_KEY",
    "max_request_bytes": 33554432,
    "price_table": {
        "sha256": "ab" * 32,
        "source": "https://www.anthropic.com/pricing",
        "retrieved": "2026-11-30",
        "user_file": False,
    },
    "budgets": {"requests": 200, "input_tokens": None, "output_tokens": None, "cost_usd": 5.0},
}
UPSTREAM = "http://127.0.0.1:41733"


def external_manifest(
    tmp_path: Path,
    settings: RunSettings,
    *,
    plan: Plan | None = None,
    run_id: str = "run-manifest-test",
    record: RecordMode = "minimal",
    run_dir: Path | None = None,
    benchmark: str = DEFAULT_BENCHMARK,
) -> dict[str, Any]:
    """A manifest of `plan` (the fast plan unless given) for external actors, as a launch
    would write it into `run_dir` (`tmp_path/run` unless given)."""
    plan = build_plan("fast") if plan is None else plan
    return build_manifest(
        run_id=run_id,
        plan_sha256=plan.plan_sha256,
        plan_kind=plan.kind,
        n_cases=len(plan.cases),
        profile_name="scripted_diagnostic",
        profile_declaration={"profile": "scripted_diagnostic", "capability_score": False},
        settings=settings,
        actor_command=None,
        record=record,
        run_dir=tmp_path / "run" if run_dir is None else run_dir,
        mailbox_root=tmp_path / "mailboxes",
        workers=1,
        confinement=ConfinementSettings(mode="external"),
        benchmark=benchmark,
    )


def gateway_manifest(
    tmp_path: Path,
    gateway: dict[str, Any] | None = GATEWAY,
    upstream: str | None = UPSTREAM,
    *,
    plan: Plan | None = None,
    run_id: str = "run-gateway-test",
    actor_command: list[str] | None = None,
) -> dict[str, Any]:
    """A manifest of `plan` (the fast plan unless given) whose sandboxed actors (`agent`
    unless another command is given) reach their provider only through the gateway."""
    plan = build_plan("fast") if plan is None else plan
    return build_manifest(
        run_id=run_id,
        plan_sha256=plan.plan_sha256,
        plan_kind=plan.kind,
        n_cases=len(plan.cases),
        profile_name="claude_code",
        profile_declaration={"profile": "claude_code", "capability_score": True},
        settings=RunSettings(),
        actor_command=["agent"] if actor_command is None else actor_command,
        record="minimal",
        run_dir=tmp_path / "run",
        mailbox_root=tmp_path / "mailboxes",
        workers=1,
        confinement=ConfinementSettings(mode="sandbox", network="gateway"),
        sandbox_tool=SandboxTool(path="/usr/bin/bwrap", version="0.8.0"),
        provider_gateway=gateway,
        provider_upstream=upstream,
    )
