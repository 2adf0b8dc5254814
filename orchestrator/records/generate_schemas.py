"""The JSON Schemas of the current private records, generated from their models.

`python -m mailroom.orchestrator.records.generate_schemas` writes each into the
repository's `schemas/` as `mailroom.<kind>.v<N>.json`; a test regenerates them in memory
and fails on any difference. Every field is required (a record writes each, null where
it has no value), and the `schema` member is the version's constant.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mailroom.checkout import CHECKOUT
from mailroom.mailbox.schemas import schema_file_name
from mailroom.orchestrator.records.audit_verdict import AUDIT_SCHEMA, AuditVerdict
from mailroom.orchestrator.records.manifest import MANIFEST_SCHEMA, RunManifest
from mailroom.orchestrator.records.result import RESULT_SCHEMA, EpisodeResult
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

DRAFT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "https://mailroom.invalid/schemas/{kind}"
SCHEMAS_FOLDER = CHECKOUT / "schemas"
# The current version of each private record, and its model (a plan's current schema is
# hand-written and frozen: `upgrade.PLAN_HISTORY`).
CURRENT: dict[str, type[BaseModel]] = {
    RESULT_SCHEMA: EpisodeResult,
    MANIFEST_SCHEMA: RunManifest,
    AUDIT_SCHEMA: AuditVerdict,
}


class _RecordSchema(GenerateJsonSchema):
    """Pydantic's JSON Schema with every field required and no generated titles."""

    def field_is_required(
        self,
        field: core_schema.ModelField | core_schema.DataclassField | core_schema.TypedDictField,
        total: bool,
    ) -> bool:
        return True

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        generated = super().model_schema(schema)
        generated.pop("title", None)
        return generated


def record_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of the current version `kind` (`mailroom.episode_result/v8`)."""
    model = CURRENT[kind]
    generated = model.model_json_schema(by_alias=True, schema_generator=_RecordSchema)
    generated["properties"]["schema"] = {"const": kind}
    head = {"$schema": DRAFT, "$id": SCHEMA_ID.format(kind=kind), "title": kind}
    order = (
        "description",
        "type",
        "properties",
        "required",
        "additionalProperties",
        "if",
        "then",
        "else",
    )
    ordered = {key: generated.pop(key) for key in order if key in generated}
    return {**head, **ordered, **generated}


def schema_text(kind: str) -> str:
    """The file's text, as written and as compared."""
    return json.dumps(record_schema(kind), indent=2, ensure_ascii=False) + "\n"


def write_schemas(folder: Path = SCHEMAS_FOLDER) -> list[Path]:
    """Write every current record's schema into `folder`; the paths written."""
    written = []
    for kind in CURRENT:
        path = folder / schema_file_name(kind)
        path.write_text(schema_text(kind), encoding="utf-8")
        written.append(path)
    return written


def main() -> None:
    for path in write_schemas():
        sys.stdout.write(f"wrote {path}\n")


if __name__ == "__main__":
    main()
