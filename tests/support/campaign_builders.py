"""A campaign's request and a launch's configuration, as the campaign's own path takes them.

A test that launches through `run_campaign`, the coordinator's `run_work` or the Ray
executor hands over a profile's declaration and limits, an actor command confined in
its sandbox, and the profile's launcher for it: built here one way, with what differs
between tests (plan, profile, actor command, settings, workers, record, simulator,
executor, slots) given by keyword. A caller makes the run directory first where its
launch needs one (`run_dir.mkdir(mode=0o700)`): nothing here writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mailroom.orchestrator.actors.confinement import ConfinementSettings
from mailroom.orchestrator.actors.launcher import ProcessLauncher, profile_launcher
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.actors.profiles import profile_dir
from mailroom.orchestrator.campaign.coordinator import Executor, LaunchConfig, LocalExecutor
from mailroom.orchestrator.campaign.launch import CampaignRequest
from mailroom.orchestrator.campaign.manifest import build_manifest
from mailroom.orchestrator.catalog.plans import Plan, render_plan
from mailroom.orchestrator.episode.settings import RecordMode, RunSettings
from mailroom.orchestrator.sim.base import SimulatorFactory

DIAGNOSTIC = "scripted_diagnostic"
# The diagnostic profile's own actor program.
DIAGNOSTIC_ACTOR = str(profile_dir(DIAGNOSTIC) / "actor.py")


def profile_declaration(profile: str = DIAGNOSTIC) -> dict[str, Any]:
    """The profile's declaration as shipped (its `profile.json`)."""
    declared: dict[str, Any] = json.loads(
        (profile_dir(profile) / "profile.json").read_text("utf-8")
    )
    return declared


def diagnostic_actor(*options: str) -> list[str]:
    """`{python} <the diagnostic actor> {endpoint} OPTIONS`: the diagnostic profile's actor
    command (`--chunks N`, `--think S`, ...)."""
    return ["{python}", DIAGNOSTIC_ACTOR, "{endpoint}", *options]


@dataclass(frozen=True)
class SandboxedActor:
    """An actor command under its profile's declared limits, confined in a sandbox, and
    the profile's launcher for it, for one run directory and mailbox root."""

    run_dir: Path
    mailbox_root: Path
    profile: str
    declaration: dict[str, Any]
    command: list[str]
    limits: ActorLimits
    confinement: ConfinementSettings
    launcher: ProcessLauncher

    def manifest(
        self,
        settings: RunSettings,
        *,
        plan_sha256: str,
        plan_kind: str,
        n_cases: int,
        record: RecordMode,
        workers: int,
    ) -> dict[str, Any]:
        """The manifest a launch of these actors writes first, named by its run
        directory."""
        assert self.launcher.sandbox is not None
        return build_manifest(
            run_id=self.run_dir.name,
            plan_sha256=plan_sha256,
            plan_kind=plan_kind,
            n_cases=n_cases,
            profile_name=self.profile,
            profile_declaration=self.declaration,
            settings=settings,
            actor_command=self.command,
            record=record,
            run_dir=self.run_dir,
            mailbox_root=self.mailbox_root,
            workers=workers,
            confinement=self.confinement,
            sandbox_tool=self.launcher.sandbox.tool,
        )

    def config(
        self,
        settings: RunSettings,
        *,
        simulator: SimulatorFactory | None,
        record: RecordMode = "minimal",
        slots: int = 1,
    ) -> LaunchConfig:
        """What the coordinator's workers (local or on Ray) are handed for these actors;
        `simulator` None: LIBERO's."""
        return LaunchConfig(
            run_dir=self.run_dir,
            mailbox_root=self.mailbox_root,
            settings=settings,
            record=record,
            launcher=self.launcher,
            limits=self.limits,
            simulator=simulator,
            slots=slots,
        )


def sandboxed_actor(
    run_dir: Path,
    mailbox_root: Path,
    command: list[str],
    *,
    profile: str = DIAGNOSTIC,
    declaration: dict[str, Any] | None = None,
) -> SandboxedActor:
    """`command` confined in a sandbox under `profile`'s limits (`declaration`: another
    declaration of it than the shipped one), launched by the profile's launcher."""
    declared = profile_declaration(profile) if declaration is None else declaration
    limits = ActorLimits.model_validate(declared["limits"])
    confinement = ConfinementSettings(mode="sandbox")
    launcher = profile_launcher(
        command,
        profile=profile,
        confinement=confinement,
        limits=limits,
        run_dir=run_dir,
        mailbox_root=mailbox_root,
    )
    assert launcher is not None  # a command was given
    return SandboxedActor(
        run_dir, mailbox_root, profile, declared, command, limits, confinement, launcher
    )


def campaign_request(
    run_dir: Path,
    mailbox_root: Path,
    *,
    plan: Plan,
    actor: list[str],
    settings: RunSettings,
    simulator: SimulatorFactory | None,
    profile: str = DIAGNOSTIC,
    declaration: dict[str, Any] | None = None,
    workers: int = 1,
    record: RecordMode = "minimal",
    slots: int = 1,
    executor: Executor | None = None,
) -> CampaignRequest:
    """A launch of `plan` through the campaign's own path (manifest, schedule, workers),
    its actors the sandboxed `actor` command of `profile` (`declaration`: another
    declaration of it than the shipped one); `executor` None: this machine."""
    sandboxed = sandboxed_actor(
        run_dir, mailbox_root, actor, profile=profile, declaration=declaration
    )
    return CampaignRequest(
        run_dir=run_dir,
        plan=plan,
        plan_bytes=render_plan(plan),
        profile=profile,
        declaration=sandboxed.declaration,
        settings=settings,
        actor_command=actor,
        launcher=sandboxed.launcher,
        limits=sandboxed.limits,
        mailbox_root=mailbox_root,
        workers=workers,
        record=record,
        confinement=sandboxed.confinement,
        simulator=simulator,
        slots=slots,
        executor=LocalExecutor() if executor is None else executor,
    )


def launch_config(
    run_dir: Path,
    mailbox_root: Path,
    *,
    actor: list[str],
    settings: RunSettings,
    simulator: SimulatorFactory | None,
    profile: str = DIAGNOSTIC,
    record: RecordMode = "minimal",
    slots: int = 1,
) -> LaunchConfig:
    """What the coordinator's workers are handed to run `actor`, sandboxed under
    `profile`'s limits; `simulator` None: LIBERO's."""
    sandboxed = sandboxed_actor(run_dir, mailbox_root, actor, profile=profile)
    return sandboxed.config(settings, simulator=simulator, record=record, slots=slots)
