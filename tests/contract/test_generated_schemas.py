"""The current private records' JSON Schemas are their models' (`generate_schemas`).

Each checked-in `schemas/mailroom.<kind>.v<N>.json` of a current record is regenerated in
memory and must be byte for byte the file: a model changed without its schema fails here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO
from mailroom.mailbox.schemas import schema_file_name, schema_files
from mailroom.orchestrator.records.generate_schemas import CURRENT, schema_text, write_schemas
from mailroom.orchestrator.records.upgrade import HISTORIES

REGENERATE = "python -m mailroom.orchestrator.records.generate_schemas"


@pytest.mark.parametrize("kind", sorted(CURRENT))
def test_a_current_schema_is_generated_from_its_model(kind: str) -> None:
    path = REPO / "schemas" / schema_file_name(kind)
    assert path.is_file(), f"{path.name} is missing: run `{REGENERATE}`"
    assert path.read_text(encoding="utf-8") == schema_text(kind), (
        f"{path.name} is not its model's schema: run `{REGENERATE}` (and publish a new "
        "version if this one was ever written)"
    )


def test_every_record_history_ends_at_a_generated_schema_or_says_it_does_not() -> None:
    assert sorted(h.current for h in HISTORIES if h.generated) == sorted(CURRENT)
    # A plan's current schema is hand-written and frozen (`upgrade.PLAN_HISTORY`).
    assert [h.current for h in HISTORIES if not h.generated] == ["mailroom.plan/v3"]
    for history in HISTORIES:
        frozen = history.versions if not history.generated else history.versions[:-1]
        assert all(schema_file_name(v) in schema_files() for v in frozen), history.kind


def test_the_generator_writes_what_the_test_compares(tmp_path: Path) -> None:
    written = write_schemas(tmp_path)
    assert sorted(p.name for p in written) == sorted(schema_file_name(k) for k in CURRENT)
    for path in written:
        kind = json.loads(path.read_text(encoding="utf-8"))["title"]
        assert path.read_text(encoding="utf-8") == schema_text(kind)
