"""Reading a run's manifest: which versions there are, whether one is valid, and what a
run's actors were handed (building one is campaign/manifest.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mailroom.mailbox.schemas import schema_errors

MANIFEST_SCHEMA_V1 = "mailroom.run_manifest/v1"
MANIFEST_SCHEMA_V2 = "mailroom.run_manifest/v2"  # adds `confinement`
MANIFEST_SCHEMA_V3 = "mailroom.run_manifest/v3"  # adds `blinding.instructions_version`
# adds `protocol.benchmark`; `protocol.adapter` any registered family's adapter
MANIFEST_SCHEMA = "mailroom.run_manifest/v4"
MANIFEST_SCHEMAS = (MANIFEST_SCHEMA_V1, MANIFEST_SCHEMA_V2, MANIFEST_SCHEMA_V3, MANIFEST_SCHEMA)
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
