"""Reading a run's manifest: which versions there are, whether one is valid, and what a
run's actors were handed (building one is campaign/manifest.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.records.result import MemoryEnforced, WritableSpace
from pydantic import BaseModel, ConfigDict, Field, model_validator

MANIFEST_SCHEMA_V1 = "mailroom.run_manifest/v1"
MANIFEST_SCHEMA_V2 = "mailroom.run_manifest/v2"  # adds `confinement`
MANIFEST_SCHEMA_V3 = "mailroom.run_manifest/v3"  # adds `blinding.instructions_version`
# adds `protocol.benchmark`; `protocol.adapter` any registered family's adapter
MANIFEST_SCHEMA_V4 = "mailroom.run_manifest/v4"
MANIFEST_SCHEMA = "mailroom.run_manifest/v5"  # adds `enforcement` (`RunEnforcement`)
MANIFEST_SCHEMAS = (
    MANIFEST_SCHEMA_V1,
    MANIFEST_SCHEMA_V2,
    MANIFEST_SCHEMA_V3,
    MANIFEST_SCHEMA_V4,
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
