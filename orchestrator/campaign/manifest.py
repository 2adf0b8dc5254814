"""The run manifest: immutable identity of a run, and the check that guards it."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from mailroom import __version__
from mailroom.checkout import CHECKOUT
from mailroom.hashing import sha256_bytes
from mailroom.mailbox.endpoint import TOKEN_BYTES
from mailroom.orchestrator.actors.actor_filesystem import kernel_filesystems
from mailroom.orchestrator.actors.agent_installation import installed_versions
from mailroom.orchestrator.actors.confinement import ConfinementSettings
from mailroom.orchestrator.actors.instructions import guide_handed, template_fields
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.actors.memory_cgroup import ceiling_problem
from mailroom.orchestrator.actors.profiles import (
    actor_instructions_template,
    declared_instructions,
    instructions_for_protocol,
)
from mailroom.orchestrator.actors.sandbox import SandboxTool
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.families.packages import recorded_packages
from mailroom.orchestrator.families.registry import DEFAULT_BENCHMARK, family, family_protocol
from mailroom.orchestrator.records.manifest import (
    MANIFEST_SCHEMA,
    ProviderGatewayRecord,
    RunEnforcement,
)
from mailroom.orchestrator.records.upgrade import RecordRefusedError, upgrade_manifest
from mailroom.timestamps import utc_timestamp

SOURCE_DIRS = ("package", "mailbox", "orchestrator", "schemas", "prompts", "agents")


class ManifestConflictError(Exception):
    """A second launch into a run directory whose manifest says something else."""


def source_sha256(root: Path = CHECKOUT) -> str:
    """One hash over the project's own source and frozen data, in a stable order."""
    digest = hashlib.sha256()
    for directory in SOURCE_DIRS:
        for path in sorted((root / directory).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(path.relative_to(root).as_posix().encode() + b"\0")
                digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def declaration_sha256(declaration: dict[str, Any]) -> str:
    """The profile's `declaration_sha256`: over `json.dumps(declaration, sort_keys=True)`
    (separators ', ' and ': ', non-ASCII escaped), as every manifest has recorded it.

    Not `mailroom.hashing.canonical_bytes`: a resume compares it with the run's own
    manifest, so any other form would refuse every run launched before.
    """
    return sha256_bytes(json.dumps(declaration, sort_keys=True).encode())


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def agent_cli_versions(declaration: Mapping[str, Any]) -> dict[str, str | None]:
    """With an agent CLI installation, its npm packages' installed versions (`npm:NAME`):
    which CLI acted is part of the method."""
    actor = declaration.get("actor")
    if not (isinstance(actor, Mapping) and actor.get("installation") == "agent_clis"):
        return {}
    return installed_versions()


EXTERNAL_ACTORS = "external actors are started by the coordinator, not here"
NOT_SANDBOXED = "the actors are not sandboxed (--confinement none): the scratch quota is sampled"


def launch_enforcement(
    confinement: ConfinementSettings, declaration: Mapping[str, Any]
) -> RunEnforcement:
    """Whether this process holds the run's actors to their limits by the kernel: the
    memory ceiling the profile declares (`memory_cgroup`, verified by its probe) and each
    sandboxed actor's writable space (`actor_filesystem`), or why not."""
    if confinement.mode == "external":
        return RunEnforcement(
            memory="not enforced",
            memory_reason=EXTERNAL_ACTORS,
            writable_space="sampled",
            writable_space_reason=EXTERNAL_ACTORS,
        )
    limits = declaration.get("limits")
    memory_mb = ActorLimits.model_validate(limits if isinstance(limits, Mapping) else {}).memory_mb
    memory_problem = ceiling_problem(memory_mb)
    space_problem = kernel_filesystems() if confinement.mode == "sandbox" else NOT_SANDBOXED
    return RunEnforcement(
        memory="enforced" if memory_problem is None else "not enforced",
        memory_reason=memory_problem,
        writable_space="kernel" if space_problem is None else "sampled",
        writable_space_reason=space_problem,
    )


def build_manifest(
    *,
    run_id: str,
    plan_sha256: str,
    plan_kind: str,
    n_cases: int,
    profile_name: str,
    profile_declaration: dict[str, Any],
    settings: RunSettings,
    actor_command: list[str] | None,
    record: str,
    run_dir: Path,
    mailbox_root: Path,
    workers: int,
    confinement: ConfinementSettings,
    sandbox_tool: SandboxTool | None = None,
    benchmark: str = DEFAULT_BENCHMARK,
    programs: Mapping[str, str] | None = None,
    provider_gateway: dict[str, Any] | None = None,
    provider_upstream: str | None = None,
) -> dict[str, Any]:
    """The run's manifest (`MANIFEST_SCHEMA`), refused unless it matches its schema.

    `provider_gateway` is what the run's actors reach their provider through
    (`ProviderGatewayRecord`: its provider, routes, the key's variable name, request
    size, price table and budgets), None when they use none; `provider_upstream` is the
    base URL it forwards to, without credentials, recorded as volatile (a stand-in's
    port changes between launches): both given, or neither.
    """
    if confinement.mode == "external" and actor_command is not None:
        raise ValueError("a spawned actor is confined by the sandbox or explicitly 'none'")
    if confinement.mode != "external" and actor_command is None:
        raise ValueError("an actor handed a launch message is confined 'external'")
    if confinement.mode == "sandbox" and sandbox_tool is None:
        raise ValueError("a sandboxed run records its sandbox tool")
    if (provider_gateway is None) != (provider_upstream is None):
        raise ValueError("a run's provider gateway and its upstream are recorded together")
    gateway = (
        ProviderGatewayRecord.model_validate(provider_gateway).document()
        if provider_gateway is not None
        else None
    )
    actor = profile_declaration.get("actor")
    fixed = actor.get("environment") if isinstance(actor, dict) else None
    actor_environment = list(confinement.actor_environment)
    if actor_command is not None and isinstance(fixed, dict):
        actor_environment += sorted(n for n in fixed if n not in actor_environment)
    # The instructions version the profile declares, or the one describing the family's
    # mailbox protocol: its exact text (and the family's guide) is what actors read.
    chosen = family(benchmark)
    protocol = family_protocol(benchmark)
    instructions_version = instructions_for_protocol(
        declared_instructions(profile_declaration), protocol.version
    )
    template = actor_instructions_template(instructions_version)
    guide = guide_handed(template, chosen.actor_guide)
    observation = chosen.observation_spec
    manifest: dict[str, Any] = {
        "schema": MANIFEST_SCHEMA,
        "run_id": run_id,
        "project": {"name": "mailroom", "version": __version__, "source_sha256": source_sha256()},
        "environment": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "machine": platform.machine(),
            "packages": {
                **{name: package_version(name) for name in recorded_packages()},
                **agent_cli_versions(profile_declaration),
            },
            "mujoco_gl": os.environ.get("MUJOCO_GL", ""),
        },
        "protocol": {
            "benchmark": benchmark,
            "adapter": chosen.adapter,
            # The catalog of the plan's family (a run of a family that keeps its catalog
            # keeps these very bytes).
            "catalog_sha256": chosen.catalog_sha256(),
            "plan_sha256": plan_sha256,
            "plan_kind": plan_kind,
            "cases": n_cases,
            "settling_controls": observation.settling_controls,
            "cameras": list(observation.cameras),
            "image_size": observation.image_size,
            "camera_transform": observation.camera_transform,
            "mailbox_protocol": protocol.label,
            "actor_guide_sha256": None if guide is None else sha256_bytes(guide.encode()),
        },
        "profile": {
            "name": profile_name,
            "declaration_sha256": declaration_sha256(profile_declaration),
            "declaration": profile_declaration,
            "capability_score": bool(profile_declaration.get("capability_score", False)),
            "programs": dict(sorted((programs or {}).items())),
        },
        "settings": settings.model_dump(mode="json"),
        "transport": {
            "kind": "file_mailbox",
            "watch_mode": settings.watch_mode,
            "actor": "spawned" if actor_command is not None else "external",
        },
        "blinding": {
            "endpoint_token_bits": TOKEN_BYTES * 8,
            "fresh_endpoint_per_episode": True,
            "fresh_actor_per_episode": True,
            "cross_episode_memory": False,
            "actor_environment": actor_environment,
            "instructions_sha256": sha256_bytes(template.encode()),
            "instructions_placeholders": sorted(template_fields(template)),
            "instructions_version": instructions_version,
        },
        "confinement": {
            "mode": confinement.mode,
            "tool": sandbox_tool.document()
            if confinement.mode == "sandbox" and sandbox_tool
            else None,
            "network": confinement.record().network,
            "read_only_paths": list(confinement.read_only_paths),
            "pass_env": list(confinement.pass_env),
            "unprivileged_outer_user": confinement.mode == "sandbox" and os.geteuid() == 0,
        },
        # Decided once, here: what each result's `enforcement` then says of its own actor.
        "enforcement": launch_enforcement(confinement, profile_declaration).document(),
        "provider_gateway": gateway,
        "record": record,
        "volatile": {
            "created_at": utc_timestamp(),
            "host": socket.gethostname(),
            "run_dir": str(run_dir),
            "mailbox_root": str(mailbox_root),
            "actor_command": actor_command,
            "workers": workers,
            "provider_upstream": provider_upstream,
        },
    }
    try:
        return upgrade_manifest(manifest).document()
    except RecordRefusedError as exc:
        raise ValueError(f"the manifest {exc}") from exc


# What a run may have left unrecorded (null once upgraded) that a resume leaves out of
# the comparison, and why. Any other unrecorded member is compared, so it refuses the
# resume: a run that recorded no confinement cannot show it resumes under the same one.
RESUMABLE_UNRECORDED = {
    ("profile", "programs"): "its programs' bytes were not recorded",
    ("protocol", "benchmark"): "its plan, compared by hash, names the benchmark",
    ("enforcement",): "what the kernel enforced was not recorded; each result records its own",
    ("protocol", "camera_transform"): "its family's adapter, compared by name, decides it",
}


def _comparable(manifest: Mapping[str, Any], existing: Mapping[str, Any]) -> dict[str, Any]:
    """A current manifest without its volatile members and run id, and without what
    `existing` left unrecorded that a resume may leave out (`RESUMABLE_UNRECORDED`)."""
    kept = {k: v for k, v in manifest.items() if k not in ("volatile", "run_id")}
    for path in RESUMABLE_UNRECORDED:
        *parents, last = path
        recorded: Any = existing
        for part in parents:
            recorded = recorded[part]
        if recorded[last] is None:
            kept = _without(kept, path)
    return kept


def _without(document: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    head, *rest = path
    if not rest:
        return {k: v for k, v in document.items() if k != head}
    return {**document, head: _without(document[head], tuple(rest))}


def _differences(old: Any, new: Any, path: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new)):
            out += _differences(old.get(key), new.get(key), f"{path}.{key}" if path else key)
        return out
    return [] if old == new else [path]


def check_compatible(existing: Mapping[str, Any], proposed: Mapping[str, Any]) -> None:
    """Refuse a launch whose non-volatile manifest differs from the run's, both compared
    in the current version (`records.upgrade`): a run launched by an earlier version
    resumes with the same settings, what it did not record aside where a resume may
    leave it out (`RESUMABLE_UNRECORDED`)."""
    try:
        recorded = upgrade_manifest(existing).document()
    except RecordRefusedError as exc:
        raise ManifestConflictError(f"this run directory's manifest {exc}") from exc
    wanted = upgrade_manifest(proposed).document()
    differing = _differences(_comparable(recorded, recorded), _comparable(wanted, recorded))
    if differing:
        shown = ", ".join(differing[:8]) + (" ..." if len(differing) > 8 else "")
        raise ManifestConflictError(
            f"this run directory was launched with different settings ({shown}); "
            "use a new --run-dir, or resume with the original settings"
        )
