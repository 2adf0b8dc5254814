"""The run manifest (`mailroom.run_manifest/v8`): the immutable identity of one run.

This is the current version, the only one written (building one is
campaign/manifest.py); a manifest of an earlier version is read through
`records/upgrade.py`, which fills what it did not record with what it meant then, null
where it was not recorded (see each field). The version history is CHANGELOG.md; the
JSON Schema of this version is generated from these models.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Annotated, Any, Literal

from mailroom.mailbox.publish import OutboxDurability
from mailroom.mailbox.watcher import WatchMode
from mailroom.orchestrator.records.confinement import ConfinementMode, NetworkPolicy
from mailroom.orchestrator.records.provider import ProviderBudgets, ProviderKind
from mailroom.orchestrator.records.result import (
    InstructionsVersion,
    MemoryEnforced,
    Timestamp,
    WritableSpace,
)
from mailroom.orchestrator.records.terms import BudgetMode, InvalidActionHandling
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MANIFEST_SCHEMA: Literal["mailroom.run_manifest/v8"] = "mailroom.run_manifest/v8"
# What every actor was handed before instructions had versions.
INSTRUCTIONS_BEFORE_VERSIONS = "v1"
# The mailbox protocols a run's actors may speak (`mailbox/protocol.py`), as recorded.
MailboxProtocolLabel = Literal[
    "mailroom.observation/v1 + mailroom.response/v1",
    "mailroom.observation/v2 + mailroom.response/v2",
]

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
# A benchmark family's name, or its simulator adapter's: checked against the evaluator's
# family registry when a run is read, not here.
FamilyName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
VariableName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
NonNegative = Annotated[int, Field(ge=0)]


def instructions_of_run(manifest: Mapping[str, Any]) -> str:
    """The actor instructions version a run's actors were handed, from its manifest in
    the current version (`RunDirectory.read_manifest`)."""
    return str(manifest["blinding"]["instructions_version"])


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Reason = Annotated[str, Field(min_length=1)]


class RunEnforcement(_Record):
    """Whether the launching process could hold the run's actors to their limits by the
    kernel, decided once at launch, each with why not when it could not (each result's
    `enforcement` says what its own actor had). `memory`: `enforced` when a memory cgroup
    per episode holds each actor to the profile's ceiling, verified by a probe;
    `writable_space`: `kernel` when each sandboxed actor's scratch/, /tmp and /dev/shm are
    a tmpfs of its own bounded in bytes and inodes, `sampled` when the scratch quota is
    only checked while the orchestrator waits."""

    memory: MemoryEnforced
    memory_reason: Reason | None
    writable_space: WritableSpace
    writable_space_reason: Reason | None

    @model_validator(mode="after")
    def _reason_when_not(self) -> RunEnforcement:
        if (self.memory == "enforced") != (self.memory_reason is None):
            raise ValueError("memory_reason is null exactly when memory is enforced")
        if (self.writable_space == "kernel") != (self.writable_space_reason is None):
            raise ValueError("writable_space_reason is null exactly when it is kernel")
        return self

    def document(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class PriceTableRecord(BaseModel):
    """Which price table a run's costs come from: its bytes' sha256, where it came from,
    when it was retrieved (prices change), and whether the coordinator supplied it."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    source: Annotated[str, Field(min_length=1, max_length=4000)]
    retrieved: Annotated[
        str, Field(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$", json_schema_extra={"format": "date"})
    ]
    user_file: bool

    @field_validator("retrieved")
    @classmethod
    def _a_real_date(cls, value: str) -> str:
        date.fromisoformat(value)  # a ValueError names a day that does not exist
        return value


class RecordedBudgets(ProviderBudgets):
    """The budgets as a manifest records them: every kind named, null for none (a profile
    may leave one out; the record never does)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    requests: Annotated[int, Field(ge=1)] | None
    input_tokens: Annotated[int, Field(ge=1)] | None
    output_tokens: Annotated[int, Field(ge=1)] | None
    cost_usd: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None


class ProviderGatewayRecord(BaseModel):
    """The provider gateway every actor of the run reached its model provider through,
    part of the method (a resume through another gateway is refused): its provider, the
    routes it forwards as the profile declares them, the name of the launch environment
    variable holding the key (never its value), the largest request body it forwards,
    the price table its costs come from and the run's per-episode provider budgets (null
    where none is set). Strict: a number written as a string is refused, not read."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    provider: ProviderKind
    routes: Annotated[
        list[Annotated[str, Field(pattern=r"^[A-Z]{3,7} /[!-~]{0,200}$")]],
        Field(min_length=1, json_schema_extra={"uniqueItems": True}),
    ]
    key_variable: VariableName
    max_request_bytes: Annotated[int, Field(ge=1)]
    price_table: PriceTableRecord
    budgets: RecordedBudgets

    @field_validator("routes")
    @classmethod
    def _each_once(cls, routes: list[str]) -> list[str]:
        if len(set(routes)) != len(routes):
            raise ValueError("a route is declared twice")
        return routes

    def document(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class ProjectRecord(_Record):
    name: Literal["mailroom"]
    version: str
    source_sha256: Sha256


class EnvironmentRecord(_Record):
    python: str
    platform: str
    machine: str
    # Installed versions of the simulator stack's Python packages; with an agent CLI
    # installation, its npm packages as `npm:<name>`.
    packages: dict[str, str | None]
    mujoco_gl: str


class ProtocolRecord(_Record):
    # The benchmark family the run's plan names; null: not recorded (the run's plan,
    # compared by its hash, names it).
    benchmark: FamilyName | None
    adapter: FamilyName
    catalog_sha256: Sha256
    plan_sha256: Sha256
    plan_kind: str
    cases: NonNegative
    settling_controls: NonNegative
    cameras: list[str]
    image_size: Annotated[int, Field(ge=1)]
    # How each camera's image was made from the render, as the family declares it
    # (`image[::-1, ::-1]` for LIBERO's); null: not recorded (before v8 every manifest
    # wrote LIBERO's, whatever its family did).
    camera_transform: Annotated[str, Field(min_length=1, max_length=200)] | None
    mailbox_protocol: MailboxProtocolLabel
    # The sha256 of the family's guide its actors were handed inside the instructions
    # (a family of mailbox protocol v2); null: none was (protocol v1, or before v8).
    actor_guide_sha256: Sha256 | None


class ProfileRecord(_Record):
    name: str
    declaration_sha256: Sha256
    declaration: dict[str, Any]
    capability_score: bool
    # The profile's own programs copied into each sandbox (the path inside, under
    # /opt/actor) and each file's sha256: a wrapper is part of the method. {} when none
    # is copied; null: not recorded.
    programs: dict[str, Sha256] | None


class SettingsRecord(_Record):
    """Every declared budget and limit of the run."""

    budget_mode: BudgetMode
    max_policy_calls: int | None
    replan_interval: int
    max_chunk: int | None
    invalid_action_handling: InvalidActionHandling
    response_timeout_s: float
    episode_wall_time_s: float | None
    proprio: bool
    watch_mode: WatchMode
    min_decisions_before_stop: int
    # Observation files are published atomically; "durable" also fsyncs them.
    outbox_durability: OutboxDurability


class TransportRecord(_Record):
    kind: Literal["file_mailbox", "in_process"]
    watch_mode: WatchMode
    actor: Literal["spawned", "external"]


class BlindingRecord(_Record):
    endpoint_token_bits: Annotated[int, Field(ge=128)]
    fresh_endpoint_per_episode: Literal[True]
    fresh_actor_per_episode: Literal[True]
    cross_episode_memory: Literal[False]
    actor_environment: list[str]
    instructions_sha256: Sha256
    instructions_placeholders: list[str]
    # The instructions version handed to every actor of the run (`prompts/`: v1 is
    # `actor_instructions.txt`, v2 `actor_instructions_v2.txt`, ...).
    instructions_version: InstructionsVersion


class SandboxToolRecord(_Record):
    name: Literal["bubblewrap"]
    path: str
    version: str


class RunConfinement(_Record):
    """How spawned actors were confined. `mode`: `sandbox` (bubblewrap namespaces, a
    read-only minimal system and the endpoint only), `none` (given explicitly:
    unconfined processes of the evaluator's user) or `external` (the coordinator starts
    the actors; nothing is enforced). `tool` is null unless the mode is `sandbox`.
    `network` is the sandbox's policy (`gateway`: the provider gateway is its only route
    out), `host` for an unconfined process, null for an external actor, as in each
    result. `pass_env` holds variable names only, never values;
    `unprivileged_outer_user`: bubblewrap itself started as a fresh unprivileged uid and
    gid per episode (the evaluator ran as root)."""

    mode: ConfinementMode
    tool: SandboxToolRecord | None
    network: NetworkPolicy | None
    read_only_paths: list[str]
    pass_env: list[VariableName]
    unprivileged_outer_user: bool


# The provider's base URL, without credentials, query or fragment.
UpstreamUrl = Annotated[str, Field(pattern=r"^https?://[^/?#@\s]+(/[^?#@\s]*)?$")]


class VolatileRecord(_Record):
    """What may differ between launches of the same run (paths, host names, times): never
    a conflict. `provider_upstream`: the base URL the provider gateway forwarded to (a
    stand-in's port changes between launches), null without a gateway."""

    created_at: Timestamp
    host: str
    run_dir: str
    mailbox_root: str
    actor_command: list[str] | None
    workers: Annotated[int, Field(ge=1)]
    provider_upstream: UpstreamUrl | None


class RunManifest(_Record):
    """The immutable identity of one run; `volatile` holds what may differ between
    launches of it. A null `confinement` or `enforcement` was not recorded (before
    confinement was, a spawned actor ran as the evaluator's own user); `provider_gateway`
    is null when the run's actors use none (their usage is then never metered). A run
    whose network is `gateway` records its gateway; a run of external actors records
    none."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    schema_: Literal["mailroom.run_manifest/v8"] = Field(default=MANIFEST_SCHEMA, alias="schema")
    run_id: Annotated[str, Field(min_length=1)]
    project: ProjectRecord
    environment: EnvironmentRecord
    protocol: ProtocolRecord
    profile: ProfileRecord
    settings: SettingsRecord
    transport: TransportRecord
    blinding: BlindingRecord
    confinement: RunConfinement | None
    enforcement: RunEnforcement | None
    provider_gateway: ProviderGatewayRecord | None
    record: Literal["full", "minimal"]
    volatile: VolatileRecord

    @model_validator(mode="after")
    def _gateway_where_the_run_had_one(self) -> RunManifest:
        network = None if self.confinement is None else self.confinement.network
        mode = None if self.confinement is None else self.confinement.mode
        if network == "gateway" and self.provider_gateway is None:
            raise ValueError("a run whose network is 'gateway' records its provider_gateway")
        if mode == "external" and self.provider_gateway is not None:
            raise ValueError("a run of external actors records no provider_gateway")
        if (self.provider_gateway is None) != (self.volatile.provider_upstream is None):
            raise ValueError("volatile.provider_upstream is null exactly when provider_gateway is")
        return self

    def document(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)
