"""Reading a run's manifest: which versions there are, whether one is valid, and what a
run's actors were handed (building one is campaign/manifest.py)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Annotated, Any

from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.records.provider import ProviderBudgets, ProviderKind
from mailroom.orchestrator.records.result import MemoryEnforced, WritableSpace
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MANIFEST_SCHEMA_V1 = "mailroom.run_manifest/v1"
MANIFEST_SCHEMA_V2 = "mailroom.run_manifest/v2"  # adds `confinement`
MANIFEST_SCHEMA_V3 = "mailroom.run_manifest/v3"  # adds `blinding.instructions_version`
# adds `protocol.benchmark`; `protocol.adapter` any registered family's adapter
MANIFEST_SCHEMA_V4 = "mailroom.run_manifest/v4"
MANIFEST_SCHEMA_V5 = "mailroom.run_manifest/v5"  # adds `enforcement` (`RunEnforcement`)
# adds `provider_gateway` (`ProviderGatewayRecord`) and `volatile.provider_upstream`;
# `confinement.network` may be "gateway"
MANIFEST_SCHEMA = "mailroom.run_manifest/v6"
MANIFEST_SCHEMAS = (
    MANIFEST_SCHEMA_V1,
    MANIFEST_SCHEMA_V2,
    MANIFEST_SCHEMA_V3,
    MANIFEST_SCHEMA_V4,
    MANIFEST_SCHEMA_V5,
    MANIFEST_SCHEMA,
)
# What every actor was handed before instructions had versions (before manifest v3).
INSTRUCTIONS_BEFORE_VERSIONS = "v1"


def manifest_errors(manifest: object) -> list[str]:
    """Schema errors of a manifest of any known version (v1 runs still report)."""
    kind = manifest.get("schema") if isinstance(manifest, dict) else None
    return schema_errors(kind if kind in MANIFEST_SCHEMAS else MANIFEST_SCHEMA, manifest)


def instructions_of_run(manifest: Mapping[str, Any]) -> str:
    """The actor instructions version a run's actors were handed: a v3 manifest names it;
    before v3 every actor was handed v1, whatever its profile's declaration said."""
    blinding = manifest.get("blinding")
    if isinstance(blinding, Mapping) and isinstance(blinding.get("instructions_version"), str):
        return str(blinding["instructions_version"])
    return INSTRUCTIONS_BEFORE_VERSIONS


Reason = Annotated[str, Field(min_length=1)]


class RunEnforcement(BaseModel):
    """A v5 manifest's `enforcement`: whether the launching process could hold the run's
    actors to their limits by the kernel, each with why not when it could not (each
    result's `enforcement` says what its own actor had)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

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
    retrieved: Annotated[str, Field(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")]
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
    """A v6 manifest's `provider_gateway`: what every actor of the run reached its model
    provider through, part of the method (a resume through another gateway is refused).
    It names the key's environment variable, never the key. Strict, as its schema is (a
    number written as a string is refused, not read)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    provider: ProviderKind
    routes: Annotated[
        list[Annotated[str, Field(pattern=r"^[A-Z]{3,7} /[!-~]{0,200}$")]], Field(min_length=1)
    ]
    key_variable: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
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
