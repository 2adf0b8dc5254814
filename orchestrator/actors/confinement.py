"""Resolves how a run's actors are confined, and what the run records of it, like blinding.

`sandbox`: every actor the orchestrator spawns runs in a bubblewrap sandbox that sees a
read-only minimal system and its own endpoint only (`sandbox.py`). `none`: spawned
actors run as plain processes of the evaluator's user; only an explicit
`--confinement none` gives it. `external`: the coordinator hands each launch message to
an actor it starts itself, so the orchestrator cannot enforce anything.

A profile may declare what its actor needs beyond that (`"confinement"` in
`profile.json`): the host network (an agent that must reach its model provider), the
names of environment variables to pass through (values are never written anywhere),
and extra read-only paths (an agent CLI's installation).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

from mailroom.orchestrator.records.confinement import (
    ConfinementMode,
    ConfinementRecord,
    NetworkPolicy,
)
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# Names the actor's environment always has; a profile cannot redeclare them.
BASE_ENVIRONMENT = ("PATH", "LANG", "HOME")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
REDACTED = "<passed through; value not recorded>"


class ConfinementError(ValueError):
    """A confinement request that cannot be honoured: refused before anything starts."""


def env_names(names: list[str]) -> list[str]:
    """Variable names a profile may declare, each once (the base ones are always set)."""
    for name in names:
        if not ENV_NAME.match(name):
            raise ValueError(f"{name!r} is not an environment variable name")
        if name in BASE_ENVIRONMENT:
            raise ValueError(f"{name} is always set by the orchestrator; do not pass it through")
    if len(set(names)) != len(names):
        raise ValueError("an environment variable name is declared twice")
    return names


class ConfinementDeclaration(BaseModel):
    """What a method profile declares its actor needs (`profile.json` `"confinement"`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    network: NetworkPolicy = "none"
    # Passed through, and refused at launch when unset (a provider key).
    pass_env: Annotated[list[str], Field(max_length=64)] = Field(default_factory=list)
    # Passed through when set (a provider's base URL, to name a proxy or a stand-in).
    pass_env_optional: Annotated[list[str], Field(max_length=64)] = Field(default_factory=list)
    read_only_paths: Annotated[list[str], Field(max_length=64)] = Field(default_factory=list)

    _names = field_validator("pass_env", "pass_env_optional")(env_names)

    @property
    def all_passed(self) -> list[str]:
        return [*self.pass_env, *self.pass_env_optional]

    @model_validator(mode="after")
    def _declared_once(self) -> ConfinementDeclaration:
        if set(self.pass_env) & set(self.pass_env_optional):
            raise ValueError("a variable is declared both required and optional")
        return self

    def unset_required(self, environment: Mapping[str, str]) -> list[str]:
        """The required pass-through names missing from `environment` (values unread)."""
        return [name for name in self.pass_env if not environment.get(name)]

    @field_validator("read_only_paths")
    @classmethod
    def _absolute(cls, paths: list[str]) -> list[str]:
        for path in paths:
            if not path.startswith("/"):
                raise ValueError(f"a declared read-only path must be absolute: {path!r}")
        return paths


class ConfinementSettings(BaseModel):
    """The run's confinement: the mode and, for a sandbox, what the actor may see."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: ConfinementMode
    network: NetworkPolicy = "none"
    pass_env: tuple[str, ...] = ()
    read_only_paths: tuple[str, ...] = ()

    @property
    def confined(self) -> bool:
        return self.mode == "sandbox"

    @property
    def actor_environment(self) -> list[str]:
        """The variable names every spawned actor gets (bubblewrap adds PWD, the working
        directory, which is scratch/ like HOME)."""
        sandbox = ["PWD"] if self.mode == "sandbox" else []
        return [*BASE_ENVIRONMENT, *sandbox, *self.pass_env]

    def record(self) -> ConfinementRecord:
        """What an attempt's result (and the run's manifest) says of this confinement:
        an external actor's network is unknown, an unconfined one shares the host's."""
        network: NetworkPolicy | None = None if self.mode == "external" else self.network
        if self.mode == "none":
            network = "host"  # an unconfined process shares everything
        return ConfinementRecord(mode=self.mode, network=network)


def resolve_confinement(
    *,
    requested: ConfinementMode | None,
    spawns_actors: bool,
    declaration: ConfinementDeclaration,
    actor_paths: tuple[str, ...] = (),
) -> ConfinementSettings:
    """The run's settings from the coordinator's request and the profile's declaration.

    Without an actor command the mode is `external` whatever was asked (a sandbox for
    an actor the orchestrator does not start would be a claim it cannot keep).
    """
    if not spawns_actors:
        if requested not in (None, "external"):
            raise ConfinementError(
                f"--confinement {requested} needs --actor: without it the coordinator starts "
                "each actor itself, so confinement is 'external' and cannot be enforced here"
            )
        return ConfinementSettings(mode="external")
    if requested == "external":
        raise ConfinementError("--confinement external is for actors started without --actor")
    mode: ConfinementMode = requested or "sandbox"
    paths = tuple(dict.fromkeys([*declaration.read_only_paths, *actor_paths]))
    return ConfinementSettings(
        mode=mode,
        network=declaration.network,
        pass_env=tuple(declaration.all_passed),
        read_only_paths=paths,
    )


def settings_of_run(manifest: Mapping[str, Any]) -> ConfinementSettings:
    """A run's confinement from its manifest; for a v1 manifest (written before
    confinement existed) what it was: spawned actors ran unconfined."""
    section = manifest.get("confinement")
    if isinstance(section, Mapping):
        # An external actor's network is recorded as unknown (null); its settings keep
        # the default, which nothing enforces.
        return ConfinementSettings(
            mode=section["mode"],
            network=section["network"] or "none",
            pass_env=tuple(section["pass_env"]),
            read_only_paths=tuple(section["read_only_paths"]),
        )
    transport = manifest.get("transport")
    spawned = isinstance(transport, Mapping) and transport.get("actor") == "spawned"
    return ConfinementSettings(mode="none" if spawned else "external")


def confinement_of_run(manifest: Mapping[str, Any]) -> ConfinementRecord:
    return settings_of_run(manifest).record()
