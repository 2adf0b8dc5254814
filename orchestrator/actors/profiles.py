"""Loads a method profile, by name (an agent folder the project ships, `agents/<name>/`)
or by path, as one typed model.

A profile is the whole method: its declared models, its actor command (used when
`--actor` is omitted), the agent CLI installation it runs from, the fixed environment
its actor gets, its confinement (network, passed variables, read-only paths), its limits,
its persistence rule and the version of the actor instructions it is handed. Unknown
fields are refused, so a misspelt setting never silently does nothing. The instruction
versions a profile may name (each a frozen file of `prompts/`) are listed here.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path
from typing import Annotated, Any, Literal

from mailroom.orchestrator.actors.confinement import ConfinementDeclaration, env_names
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.records.provider import ProviderDeclaration
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

# The agents the project ships: one folder each under `agents/`, package data of
# `mailroom.agents` (found the same way in a checkout and an installed wheel).
AGENTS_PACKAGE = "mailroom.agents"
PROFILE_FILE = "profile.json"
PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
MAX_PROFILE_BYTES = 1 << 20

# The versions of the shared actor instructions, each a frozen file of `prompts/`: a run
# records which one its actors were handed (a new version is a new file).
INSTRUCTION_FILES: dict[str, str] = {
    "v1": "actor_instructions.txt",
    "v2": "actor_instructions_v2.txt",
    "v3": "actor_instructions_v3.txt",
}
# The mailbox protocol (`mailbox/protocol.py`) each version describes; v3 leaves the
# robot to its family's guide.
INSTRUCTION_PROTOCOLS: dict[str, str] = {"v1": "v1", "v2": "v1", "v3": "v2"}
DEFAULT_INSTRUCTIONS = "v1"
# The trace formats agents register (`agents/<name>/trace.py`), by name: a profile's
# `actor.trace` must name one, and the viewer reads an account with it.
TRACE_PARSERS_GROUP = "mailroom.agent_traces"
MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$")


@functools.cache
def registered_trace_formats() -> tuple[str, ...]:
    """The trace formats installed agents register (their names only: nothing loaded),
    read once a process: every profile validated asks."""
    return tuple(sorted({e.name for e in metadata.entry_points(group=TRACE_PARSERS_GROUP)}))


class ProfileError(ValueError):
    """A profile that cannot be found or is refused; the message is meant for people."""


def instructions_version_of(reference: str) -> str:
    """`"v2"` or `"prompts/actor_instructions_v2.txt"` -> `"v2"`; anything else refused."""
    if reference in INSTRUCTION_FILES:
        return reference
    for version, name in INSTRUCTION_FILES.items():
        if reference == f"prompts/{name}":
            return version
    known = ", ".join(f"{v} (prompts/{n})" for v, n in INSTRUCTION_FILES.items())
    raise ValueError(f"unknown actor instructions {reference!r}: known versions are {known}")


def declared_instructions(declaration: Mapping[str, Any]) -> str:
    """The instructions version a recorded profile declaration names (v1 if none)."""
    reference = declaration.get("instructions", DEFAULT_INSTRUCTIONS)
    return instructions_version_of(reference if isinstance(reference, str) else "")


def instructions_for_protocol(version: str, protocol: str) -> str:
    """The instructions a run's actors are handed: `version` (what the profile declares)
    where it describes the mailbox protocol the plan's family speaks, otherwise the
    newest version that does (a profile written for LIBERO names a v1 text; a family of
    protocol v2 is described by v3). The run records the version handed."""
    version = instructions_version_of(version)
    if INSTRUCTION_PROTOCOLS[version] == protocol:
        return version
    fitting = [v for v, p in INSTRUCTION_PROTOCOLS.items() if p == protocol]
    if not fitting:
        raise ValueError(f"no actor instructions describe mailbox protocol {protocol!r}")
    return max(fitting, key=lambda v: int(v[1:]))


def actor_instructions_template(version: str = DEFAULT_INSTRUCTIONS) -> str:
    """The instructions template of `version`, exactly as frozen."""
    name = INSTRUCTION_FILES[instructions_version_of(version)]
    return resources.files("mailroom.prompts").joinpath(name).read_text(encoding="utf-8")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Note = Annotated[str, Field(max_length=2000)]


class DeclaredModel(_Strict):
    """A model the method uses, as declared: never verified by a file mailbox."""

    role: Annotated[str, Field(min_length=1, max_length=100)]
    identity: Annotated[str, Field(min_length=1, max_length=200)]
    provider: Annotated[str, Field(min_length=1, max_length=200)]
    verified: Literal[False]
    note: Note | None = None


class PersistenceRule(_Strict):
    min_decisions_before_stop: Annotated[int, Field(ge=0)] = 0


class ActorDeclaration(_Strict):
    """How the orchestrator starts the profile's actor when `--actor` is not given.

    `command` is an argv template: `{endpoint}`, `{python}` (the system's Python inside
    the sandbox) and `{profile_dir}` (the profile's own folder, copied in under
    `/opt/actor`). `model_arguments` are appended when the coordinator names a model
    (`{model}`). `environment` holds fixed, public values every actor of the profile gets
    (telemetry off, where the agent keeps its own state). `installation` names the agent
    CLI installation it runs from (`agent_clis`: the project's npm install of every agent
    folder's `install.json`, one lockfile), whose programs are on the actor's PATH.
    `trace` names the format of the agent's own account of its work on standard output
    (a parser its agent folder registers), kept privately and shown as not verified.
    """

    command: Annotated[list[Annotated[str, Field(max_length=4096)]], Field(min_length=1)]
    model_arguments: list[Annotated[str, Field(max_length=4096)]] = Field(default_factory=list)
    environment: dict[str, Annotated[str, Field(max_length=4096)]] = Field(default_factory=dict)
    installation: Literal["agent_clis"] | None = None
    trace: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")] | None = None

    @field_validator("model_arguments")
    @classmethod
    def _names_the_model(cls, arguments: list[str]) -> list[str]:
        if arguments and not any("{model}" in a for a in arguments):
            raise ValueError("model_arguments must contain {model}")
        return arguments

    @field_validator("trace")
    @classmethod
    def _registered_trace(cls, trace: str | None) -> str | None:
        known = registered_trace_formats()
        if trace is not None and trace not in known:
            raise ValueError(
                f"no agent registers the trace format {trace!r} (registered: "
                f"{', '.join(known) or 'none'}; entry points of {TRACE_PARSERS_GROUP})"
            )
        return trace

    @field_validator("environment")
    @classmethod
    def _fixed_names(cls, environment: dict[str, str]) -> dict[str, str]:
        env_names(list(environment))
        for name, value in environment.items():
            if "\0" in value:
                raise ValueError(f"the value of {name} holds a NUL byte")
        return environment


class MethodProfile(_Strict):
    """`profile.json`, every field typed; notes are free text for people."""

    profile: Annotated[str, Field(pattern=PROFILE_NAME.pattern)]
    method_family: Annotated[str, Field(min_length=1, max_length=100)]
    purpose: Note = ""
    capability_score: bool = False
    declared_models: list[DeclaredModel] = Field(default_factory=list)
    identity_note: Note | None = None
    history: Literal["current_observation_only"] = "current_observation_only"
    history_note: Note | None = None
    persistence_rule: PersistenceRule = Field(default_factory=PersistenceRule)
    provider_usage: Note | None = None
    instructions: str = f"prompts/{INSTRUCTION_FILES[DEFAULT_INSTRUCTIONS]}"
    limits: ActorLimits = Field(default_factory=ActorLimits)
    limits_note: Note | None = None
    confinement: ConfinementDeclaration = Field(default_factory=ConfinementDeclaration)
    confinement_note: Note | None = None
    # How the agent reaches its model provider through the gateway (`network: gateway`).
    provider: ProviderDeclaration | None = None
    provider_note: Note | None = None
    actor: ActorDeclaration | None = None
    actor_note: Note | None = None

    @field_validator("instructions")
    @classmethod
    def _known_instructions(cls, reference: str) -> str:
        instructions_version_of(reference)
        return reference

    @model_validator(mode="after")
    def _passed_names_apart_from_fixed(self) -> MethodProfile:
        if self.actor is not None:
            both = set(self.actor.environment) & set(self.confinement.all_passed)
            if both:
                raise ValueError(f"{sorted(both)} are both fixed and passed through")
        return self

    @model_validator(mode="after")
    def _gateway_declares_its_provider(self) -> MethodProfile:
        if self.confinement.network == "gateway":
            if self.provider is None:
                raise ValueError('a "gateway" network needs the profile\'s "provider"')
            if self.provider.key_variable in self.confinement.all_passed:
                raise ValueError(
                    f"{self.provider.key_variable} is the provider key, which the gateway "
                    "keeps: it is never passed into the sandbox"
                )
            fixed = set(self.actor.environment) if self.actor is not None else set()
            taken = {self.provider.key_variable, self.provider.base_url_variable}
            if taken & (fixed | set(self.confinement.all_passed)):
                raise ValueError(f"{sorted(taken)} are set by the gateway for each episode")
        return self

    @property
    def uses_gateway(self) -> bool:
        return self.confinement.network == "gateway" and self.provider is not None

    @property
    def instructions_version(self) -> str:
        return instructions_version_of(self.instructions)

    def declaration(self) -> dict[str, Any]:
        """The declaration as the manifest records it (no defaults added)."""
        return self.model_dump(mode="json", exclude_unset=True)

    def with_model(self, model: str | None, *, passed: bool = True) -> MethodProfile:
        """The profile with the model the coordinator named recorded as declared and
        unverified for its actor role; no model: the actor role's identity stays (an
        agent CLI's default model is unknown)."""
        if model is None:
            return self
        if not MODEL_NAME.match(model):
            raise ProfileError(f"{model!r} is not a model name (letters, digits, ._:/@+-)")
        named = DeclaredModel(
            role="actor",
            identity=model,
            provider=next(
                (m.provider for m in self.declared_models if m.role == "actor"), "unknown"
            ),
            verified=False,
            note=(
                "named by the coordinator (--model)"
                + ("; passed to the actor's command" if passed else "; not passed by mailroom")
                + "; declared, unverified"
            ),
        )
        others = [m for m in self.declared_models if m.role != "actor"]
        data = self.declaration()
        data["declared_models"] = [named.model_dump(mode="json", exclude_none=True)] + [
            m.model_dump(mode="json", exclude_none=True) for m in others
        ]
        return MethodProfile.model_validate(data)


@dataclass(frozen=True)
class LoadedProfile:
    """A profile and the folder it came from (its programs are copied from there)."""

    profile: MethodProfile
    directory: Path

    @property
    def name(self) -> str:
        return self.profile.profile


def _parse(path: Path) -> MethodProfile:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_PROFILE_BYTES + 1)
    except OSError as exc:
        raise ProfileError(f"cannot read the profile {path}: {exc.strerror or exc}") from exc
    if len(data) > MAX_PROFILE_BYTES:
        raise ProfileError(f"the profile {path} is larger than {MAX_PROFILE_BYTES >> 10} KiB")
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProfileError(f"the profile {path} is not UTF-8 JSON: {exc}") from exc
    try:
        return MethodProfile.model_validate(document)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise ProfileError(f"the profile {path} is refused: {problems}") from exc


def shipped_agents() -> dict[str, Path]:
    """The agent folders the project ships, by name: each folder of `mailroom.agents`
    holding a `profile.json`, at its real path (an editable install's links resolved, so
    a profile's programs are found where they are)."""
    found: dict[str, Path] = {}
    for entry in resources.files(AGENTS_PACKAGE).iterdir():
        profile = entry / PROFILE_FILE
        if entry.is_dir() and PROFILE_NAME.match(entry.name) and profile.is_file():
            found[entry.name] = Path(os.path.realpath(str(profile))).parent
    return dict(sorted(found.items()))


def load_profile(reference: str | Path) -> LoadedProfile:
    """A profile by name (a shipped agent folder, `agents/<name>/profile.json`) or by
    path (a `profile.json`, or a folder holding one, kept anywhere). A path is anything
    with a `/` in it or that ends in `.json`."""
    text = str(reference)
    if "/" in text or text.endswith(".json") or isinstance(reference, Path):
        path = Path(text).expanduser()
        file = path / PROFILE_FILE if path.is_dir() else path
        if not file.is_file():
            raise ProfileError(f"no profile at {path} (a {PROFILE_FILE} or a folder holding one)")
        return LoadedProfile(_parse(file), file.resolve().parent)
    if not PROFILE_NAME.match(text):
        raise ProfileError(f"{text!r} is not a profile name")
    folder = profile_dir(text)
    return LoadedProfile(_parse(folder / PROFILE_FILE), folder)


def profile_dir(profile: str) -> Path:
    """The folder of a shipped agent named `profile`."""
    shipped = shipped_agents()
    if profile not in shipped:
        raise ProfileError(
            f"no method profile {profile!r} among the shipped agents "
            f"({', '.join(shipped)}); name a profile folder or file by its path to use "
            "one kept elsewhere"
        )
    return shipped[profile]
