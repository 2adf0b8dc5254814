"""Starting one fresh actor per episode: confined by the sandbox, or plainly (`none`)."""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from mailroom.hashing import sha256_bytes
from mailroom.mailbox.endpoint import Endpoint, make_mailbox_root
from mailroom.orchestrator.actors.actor_filesystem import ActorFilesystem, kernel_filesystems
from mailroom.orchestrator.actors.actor_network import ActorNetwork, actor_networks
from mailroom.orchestrator.actors.actor_program import (
    PROGRAMS_INSIDE,
    ActorProgram,
    ProgramSearch,
    inside_python,
    prepare_program,
)
from mailroom.orchestrator.actors.agent_installation import AGENT_CLI_FOLDER
from mailroom.orchestrator.actors.confinement import ConfinementError, ConfinementSettings
from mailroom.orchestrator.actors.hidden_paths import SandboxPathError, evaluator_paths
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.actors.memory_cgroup import episode_cgroup
from mailroom.orchestrator.actors.outer_identity import (
    OuterIdentity,
    refuse_unreachable,
    unreachable_part,
)
from mailroom.orchestrator.actors.process import ActorProcess, render_command
from mailroom.orchestrator.actors.profiles import LoadedProfile, load_profile
from mailroom.orchestrator.actors.sandbox import Sandbox, SandboxCommand
from mailroom.orchestrator.actors.sandbox_probe import probe_sandbox
from mailroom.orchestrator.records.provider import ProviderDeclaration

TOKEN_PREFIX = "sk-episode-"  # shaped like a key: some clients check that one is set


@dataclass(frozen=True)
class ProviderAccess:
    """How a profile's actors reach their provider through the gateway: its declaration
    and the model the method declared (None: the CLI's default, unknown)."""

    declaration: ProviderDeclaration
    declared_model: str | None = None

    def episode_environment(self, token: str, base_url: str) -> dict[str, str]:
        """What an actor is handed in place of the key and the provider's address."""
        return {
            self.declaration.key_variable: token,
            self.declaration.base_url_variable: base_url + self.declaration.base_path,
        }


def refuse_gateway_here(settings: ConfinementSettings) -> None:
    """A sandboxed actor reaches the gateway only from a network namespace of its own,
    which only root can make here: refused before anything starts otherwise."""
    if settings.network != "gateway" or settings.mode != "sandbox":
        return
    problem = actor_networks()
    if problem is not None:
        raise ConfinementError(
            f"the provider gateway cannot confine the actor's network here ({problem}): "
            "run as root, or run unconfined with --confinement none (metered, not confined)"
        )


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
        output_files: Mapping[str, Path] | None,
    ) -> ActorHandle:
        """`output_files`: where the actor's `stdout` and `stderr` are kept (None: nowhere)."""
        ...


def passed_environment(names: Sequence[str], source: Mapping[str, str]) -> dict[str, str]:
    """The declared pass-through variables that are set (values never recorded)."""
    return {name: source[name] for name in names if name in source}


class InstallationMissingError(ConfinementError):
    """A profile's agent CLI installation is not there: the project installs it."""


def refuse_unreadable_installation(folder: Path) -> None:
    """What is inside the installation must be readable by others: the sandbox's user."""
    mode = folder.stat().st_mode
    if os.geteuid() == 0 and mode & 0o005 != 0o005:  # else the sandbox is the same user
        raise SandboxPathError(
            f"the agent CLI installation {folder} is not readable by others (mode "
            f"{mode & 0o777:o}): reinstall it with `make agent-clis` under umask 022"
        )


def reachable_installation(folder: Path) -> Path:
    """The installation where the sandbox's user can reach it: the folder itself, or, when
    a folder above it is closed to others (a project checked out in a private folder),
    a copy of hard links (a plain copy across file systems) in a fresh folder under the
    temporary folder, removed when this process exits."""
    if os.geteuid() != 0 or unreachable_part(folder) is None:
        return folder
    for place in dict.fromkeys((tempfile.gettempdir(), "/var/tmp")):
        target = _staged(folder, Path(place), link=True)
        if target is not None:
            return target
    target = _staged(folder, Path(tempfile.gettempdir()), link=False)
    if target is None:
        raise SandboxPathError(f"the agent CLI installation {folder} cannot be staged")
    return target


def _staged(folder: Path, place: Path, *, link: bool) -> Path | None:
    """`folder` copied (as hard links, or plainly) into a fresh open folder in `place`."""
    try:
        stage = Path(tempfile.mkdtemp(prefix="mailroom-agent-clis-", dir=place))
    except OSError:
        return None
    atexit.register(shutil.rmtree, stage, True)
    os.chmod(stage, 0o755)
    target = stage / folder.name
    try:
        shutil.copytree(
            folder, target, symlinks=True, copy_function=os.link if link else shutil.copy2
        )
    except OSError:
        shutil.rmtree(stage, ignore_errors=True)
        return None
    return target


def installation_folder(name: str | None) -> Path | None:
    """The folder of a profile's declared installation, which must exist."""
    if name is None:
        return None
    if not AGENT_CLI_FOLDER.is_dir():
        raise InstallationMissingError(
            f"the agent CLIs are not installed ({AGENT_CLI_FOLDER} is missing): run "
            "`make agent-clis` (make test and make demo do it)"
        )
    return AGENT_CLI_FOLDER


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
    # Fixed, public values the profile gives every actor (PATH is the program's).
    environment: tuple[tuple[str, str], ...] = ()
    # Its provider through the gateway (the `gateway` network), else None.
    provider: ProviderAccess | None = None

    @property
    def confinement(self) -> ConfinementSettings:
        return self.settings

    def programs(self) -> dict[str, str]:
        """The profile's own programs copied into each sandbox: path inside -> sha256."""
        return {
            inside: sha256_bytes(Path(host).read_bytes())
            for host, inside in self.program.copied_files
            if Path(inside).is_relative_to(PROGRAMS_INSIDE)
        }

    def identity(self) -> OuterIdentity:
        return OuterIdentity.fresh() if self.sandbox is not None else OuterIdentity(None, None)

    def start(
        self,
        endpoint: Endpoint,
        instructions: str,
        identity: OuterIdentity,
        output_files: Mapping[str, Path] | None,
    ) -> ActorProcess:
        passed = passed_environment(self.settings.pass_env, os.environ)
        fixed = {**dict(self.environment), "PATH": self.program.path}
        root = str(endpoint.root)
        command: SandboxCommand | None = None
        filesystem: ActorFilesystem | None = None
        network: ActorNetwork | None = None
        token: str | None = None
        if self.settings.network == "gateway" and self.provider is not None:
            network = ActorNetwork(confined=self.sandbox is not None)
            token = TOKEN_PREFIX + secrets.token_hex(24)
            fixed.update(self.provider.episode_environment(token, network.base_url))
        filesystem_note: str | None = None
        confinement: dict[str, object] = {"mode": "none"}
        if self.sandbox is None:
            argv = render_command(self.program.argv, endpoint=root, python=sys.executable)
        else:
            argv = render_command(self.program.argv, endpoint=root, python=inside_python())
            held = endpoint.held
            # Its scratch/, /tmp and /dev/shm bounded by the kernel where it may mount.
            filesystem_note = kernel_filesystems()
            if filesystem_note is None and identity.uid is not None and identity.gid is not None:
                filesystem = ActorFilesystem(self.limits, identity.uid, identity.gid)
            elif filesystem_note is None:
                filesystem_note = "the sandbox has no user of its own"
            try:
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
                    writable=None if filesystem is None else filesystem.bwrap_fds,
                    own_network=network is not None,
                )
            except BaseException:
                if filesystem is not None:
                    filesystem.close()
                if network is not None:
                    network.close()
                raise
            confinement = {
                "mode": "sandbox",
                "tool": self.sandbox.tool.document(),
                "network": self.settings.network,
                "outer_uid": identity.uid,
            }
        # The actor's memory ceiling, where this machine enforces it (`memory_cgroup.py`).
        try:
            memory = episode_cgroup(self.limits.memory_mb)
        except BaseException:
            if command is not None:
                command.close()
            if filesystem is not None:
                filesystem.close()
            if network is not None:
                network.close()
            raise
        try:
            process = ActorProcess(
                argv,
                instructions=instructions,
                workdir=endpoint.scratch,
                limits=self.limits,
                output_files=output_files,
                passed_env=passed,
                fixed_env=fixed,
                sandbox=command,
                identity=identity if command is not None else None,
                confinement=confinement,
                memory=memory,
                filesystem=filesystem,
                filesystem_note=filesystem_note,
                network=network,
                secret_env=[]
                if self.provider is None
                else [self.provider.declaration.key_variable],
            )
            process.gateway_token = token
            return process
        except BaseException:
            if memory is not None:
                memory.remove()
            raise
        finally:
            if memory is not None:
                memory.close_in_parent()  # the child joined it; the parent needs it no more


def process_launcher(
    command: Sequence[str],
    limits: ActorLimits | None = None,
    *,
    confinement: ConfinementSettings | None = None,
    run_dir: Path | None = None,
    mailbox_root: Path | None = None,
    profile_dir: Path | None = None,
    cwd: Path | None = None,
    installation: Path | None = None,
    environment: Mapping[str, str] | None = None,
    provider: ProviderAccess | None = None,
) -> ProcessLauncher:
    """A launcher for `command`, confined by default; refuses what cannot be confined.

    Raises `ConfinementError` (a `SandboxUnavailableError` when bubblewrap cannot start,
    a `SandboxPathError` for a path of the evaluator) before anything is created: a
    mailbox root it made for the check is removed again when it refuses.
    """
    settings = confinement or ConfinementSettings(mode="sandbox")
    limits = limits or ActorLimits()
    fixed = tuple(sorted((environment or {}).items()))
    if settings.mode == "external":
        raise ConfinementError("an external actor is not started by the orchestrator")
    if settings.network == "gateway" and provider is None:
        raise ConfinementError("a gateway network needs the profile's provider declaration")
    refuse_gateway_here(settings)
    if settings.mode == "none":
        shared = sorted(n for n, v in fixed if v == "/tmp" or v.startswith("/tmp/"))
        if shared:
            raise ConfinementError(
                f"the profile keeps its agent's own state in /tmp ({', '.join(shared)}), "
                "which is private to each sandbox: unconfined, concurrent and later episodes "
                "would share it (cross-episode memory); run it confined"
            )
        search = ProgramSearch.of(settings.read_only_paths, installation, installation_inside=None)
        program = ActorProgram(tuple(command), path=search.inside_path)
        return ProcessLauncher(program, settings, limits, None, fixed, provider)
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
    if installation is not None:
        refuse_unreadable_installation(installation)
        installation = reachable_installation(installation)
    made_root = mailbox_root is not None and not mailbox_root.exists()
    try:
        if mailbox_root is not None:
            make_mailbox_root(mailbox_root)
            refuse_unreachable(mailbox_root, "the mailbox root", read=False)
        program = prepare_program(
            command,
            cwd=cwd or Path.cwd(),
            profile_dir=profile_dir,
            private=private,
            read_only_paths=settings.read_only_paths,
            installation=installation,
        )
    except (ConfinementError, OSError) as exc:
        if made_root and mailbox_root is not None:
            with contextlib.suppress(OSError):
                mailbox_root.rmdir()  # only ever empty here: nothing was started
        if isinstance(exc, OSError):
            raise SandboxPathError(f"the mailbox root {mailbox_root}: {exc}") from exc
        raise
    return ProcessLauncher(program, settings, limits, sandbox, fixed, provider)


def profile_launcher(
    actor_command: Sequence[str] | None,
    *,
    profile: str | LoadedProfile,
    confinement: ConfinementSettings,
    limits: ActorLimits,
    run_dir: Path,
    mailbox_root: Path,
) -> ProcessLauncher | None:
    """A run's launcher for an actor command and its profile (None: external actors,
    handed launch messages): the profile's programs, installation and fixed environment.
    Raises `ConfinementError` before any worker starts."""
    if actor_command is None:
        return None
    loaded = profile if isinstance(profile, LoadedProfile) else load_profile(profile)
    declared = loaded.profile.actor
    return process_launcher(
        actor_command,
        limits,
        confinement=confinement,
        run_dir=run_dir,
        mailbox_root=mailbox_root,
        profile_dir=loaded.directory,
        installation=installation_folder(None if declared is None else declared.installation),
        environment=None if declared is None else declared.environment,
        provider=provider_access(loaded),
    )


def provider_access(loaded: LoadedProfile) -> ProviderAccess | None:
    """The profile's route to its provider when it uses the gateway, with the model it
    declares for its actor role (None when that is unknown: the CLI's default)."""
    method = loaded.profile
    if not method.uses_gateway or method.provider is None:
        return None
    model = next((m.identity for m in method.declared_models if m.role == "actor"), None)
    return ProviderAccess(method.provider, None if model in (None, "unknown") else model)
