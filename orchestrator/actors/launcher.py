"""Starting one fresh actor per episode: confined by the sandbox, or plainly (`none`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from mailroom.mailbox.endpoint import Endpoint, make_mailbox_root
from mailroom.orchestrator.actors.confinement import ConfinementError, ConfinementSettings
from mailroom.orchestrator.actors.process import ActorProcess, render_command
from mailroom.orchestrator.actors.sandbox import (
    ActorProgram,
    OuterIdentity,
    Sandbox,
    SandboxCommand,
    evaluator_paths,
    inside_python,
    prepare_program,
    probe_sandbox,
    refuse_unreachable,
)
from mailroom.orchestrator.episode.settings import ActorLimits


class ActorHandle(Protocol):
    def stop(self) -> int | None: ...

    def alive(self) -> bool: ...

    def description(self) -> dict[str, object]:
        """What the actor was given (argv, environment, working directory), for audits."""
        ...

    def stop_details(self) -> dict[str, object]:
        """After `stop`: what the actor left (its kept output, processes still alive)."""
        ...


class ActorLauncher(Protocol):
    """Starts one fresh actor for one endpoint, given the rendered instructions."""

    @property
    def confinement(self) -> ConfinementSettings: ...

    def identity(self) -> OuterIdentity:
        """The outer uid and gid of the next actor (the endpoint lets that group in)."""
        ...

    def start(
        self,
        endpoint: Endpoint,
        instructions: str,
        identity: OuterIdentity,
        output_dir: Path | None,
    ) -> ActorHandle: ...


def passed_environment(names: Sequence[str], source: Mapping[str, str]) -> dict[str, str]:
    """The declared pass-through variables that are set (values never recorded)."""
    return {name: source[name] for name in names if name in source}


@dataclass(frozen=True)
class ProcessLauncher:
    """An actor process per episode from an argv template (`{endpoint}`, `{python}`).

    For mode `sandbox` the template was checked and rewritten by `prepare_program`
    (refused at launch if it names something of the evaluator) and each actor runs
    under bubblewrap; for `none` it runs as a plain process, as the evaluator's user.
    """

    program: ActorProgram
    settings: ConfinementSettings
    limits: ActorLimits
    sandbox: Sandbox | None

    @property
    def confinement(self) -> ConfinementSettings:
        return self.settings

    def identity(self) -> OuterIdentity:
        return OuterIdentity.fresh() if self.sandbox is not None else OuterIdentity(None, None)

    def start(
        self,
        endpoint: Endpoint,
        instructions: str,
        identity: OuterIdentity,
        output_dir: Path | None,
    ) -> ActorProcess:
        passed = passed_environment(self.settings.pass_env, os.environ)
        root = str(endpoint.root)
        command: SandboxCommand | None = None
        confinement: dict[str, object] = {"mode": "none"}
        if self.sandbox is None:
            argv = render_command(self.program.argv, endpoint=root, python=sys.executable)
        else:
            argv = render_command(self.program.argv, endpoint=root, python=inside_python())
            held = endpoint.held
            command = self.sandbox.command(
                self.program,
                argv,
                endpoint_root=endpoint.root,
                held_dirs={
                    "root": held.root_fd,
                    "outbox": held.outbox_fd,
                    "inbox": held.inbox_fd,
                    "scratch": held.scratch_fd,
                },
                scratch=endpoint.scratch,
            )
            confinement = {
                "mode": "sandbox",
                "tool": self.sandbox.tool.document(),
                "network": self.settings.network,
                "outer_uid": identity.uid,
            }
        return ActorProcess(
            argv,
            instructions=instructions,
            workdir=endpoint.scratch,
            limits=self.limits,
            output_dir=output_dir,
            passed_env=passed,
            sandbox=command,
            identity=identity if command is not None else None,
            confinement=confinement,
        )


def process_launcher(
    command: Sequence[str],
    limits: ActorLimits | None = None,
    *,
    confinement: ConfinementSettings | None = None,
    run_dir: Path | None = None,
    mailbox_root: Path | None = None,
    profile_dir: Path | None = None,
    cwd: Path | None = None,
) -> ProcessLauncher:
    """A launcher for `command`, confined by default; refuses what cannot be confined.

    Raises `ConfinementError` (a `SandboxUnavailableError` when bubblewrap cannot start,
    a `SandboxPathError` for a path of the evaluator) before anything is created.
    """
    settings = confinement or ConfinementSettings(mode="sandbox")
    limits = limits or ActorLimits()
    if settings.mode == "external":
        raise ConfinementError("an external actor is not started by the orchestrator")
    if settings.mode == "none":
        return ProcessLauncher(ActorProgram(tuple(command)), settings, limits, None)
    tool = probe_sandbox()
    private = evaluator_paths(*(p for p in (run_dir, mailbox_root) if p is not None))
    sandbox = Sandbox(
        tool,
        settings,
        private,
        tmp_size_mb=limits.scratch_quota_mb or 1024,
    )
    if any(arg == "{python}" for arg in command):
        inside_python()  # refused now, not at the first episode
    if mailbox_root is not None:
        make_mailbox_root(mailbox_root)
        refuse_unreachable(mailbox_root, "the mailbox root", read=False)
    program = prepare_program(
        command,
        cwd=cwd or Path.cwd(),
        profile_dir=profile_dir,
        private=private,
        read_only_paths=settings.read_only_paths,
    )
    return ProcessLauncher(program, settings, limits, sandbox)


def profile_launcher(
    actor_command: Sequence[str] | None,
    *,
    profile: str,
    confinement: ConfinementSettings,
    limits: ActorLimits,
    run_dir: Path,
    mailbox_root: Path,
) -> ProcessLauncher | None:
    """A run's launcher for a profile's actor command (None: external actors, handed
    launch messages). Raises `ConfinementError` before any worker starts."""
    from mailroom.orchestrator.actors.profiles import profile_dir

    if actor_command is None:
        return None
    return process_launcher(
        actor_command,
        limits,
        confinement=confinement,
        run_dir=run_dir,
        mailbox_root=mailbox_root,
        profile_dir=profile_dir(profile),
    )
