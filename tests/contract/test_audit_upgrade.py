"""Audit verdicts of every version read as the current one (`records/upgrade.py`).

A current verdict is checked by its generated schema and its model; an older one by its
own frozen schema first, then upgraded step by step: a v1 verdict's leaks say no source
and it lists no information (null: its audit told no information apart, every find was
a leak). `tests/support/data/older_records/audit.v1.json` and `audit.v2.json` were made by hand
from the frozen schemas.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from conftest import REPO
from document_mutations import DELETE, Doc, mutated, set_at
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.records.audit_verdict import AUDIT_SCHEMA, AuditVerdict
from mailroom.orchestrator.records.upgrade import (
    AUDIT_HISTORY,
    RecordRefusedError,
    upgrade_verdict,
)

OLDER = REPO / "tests" / "support" / "data" / "older_records"
V1: Doc = json.loads((OLDER / "audit.v1.json").read_text(encoding="utf-8"))
V2: Doc = json.loads((OLDER / "audit.v2.json").read_text(encoding="utf-8"))
CURRENT: Doc = {**V2, "schema": AUDIT_SCHEMA}


def test_the_history_ends_at_the_current_generated_version() -> None:
    assert AUDIT_HISTORY.current == AUDIT_SCHEMA == "mailroom.audit/v3"
    assert AUDIT_HISTORY.versions == ("mailroom.audit/v1", "mailroom.audit/v2", AUDIT_SCHEMA)
    assert AUDIT_HISTORY.generated


def test_a_v2_verdict_reads_as_it_was_written() -> None:
    assert schema_errors("mailroom.audit/v2", V2) == []
    document = upgrade_verdict(V2).document()
    assert document == CURRENT
    assert schema_errors(AUDIT_SCHEMA, document) == []


def test_a_v1_verdict_reads_with_what_it_did_not_record_null() -> None:
    assert schema_errors("mailroom.audit/v1", V1) == []
    verdict = upgrade_verdict(V1)
    document = verdict.document()
    assert schema_errors(AUDIT_SCHEMA, document) == []
    assert document["schema"] == AUDIT_SCHEMA and document["information"] is None
    assert document["leaks"] == [{**leak, "source": None} for leak in V1["leaks"]]
    # A date an actor wrote was a leak then, and stays one: what was recorded stands.
    assert [x.identifier_kind for x in verdict.leaks] == ["date", "suite"]
    changed = {"schema", "leaks", "information"}
    assert {k: v for k, v in document.items() if k not in changed} == {
        k: v for k, v in V1.items() if k not in changed
    }


def test_a_current_verdict_reads_as_it_was_written() -> None:
    assert upgrade_verdict(CURRENT).document() == CURRENT
    not_recorded = upgrade_verdict(V1).document()
    assert upgrade_verdict(not_recorded).document() == not_recorded


V1_INVALID = mutated(
    V1,
    {
        "with_information": set_at("information", []),
        "with_information_null": set_at("information", None),
        "leak_with_source": set_at("leaks.0.source", "actor_written"),
        "leak_with_source_null": set_at("leaks.0.source", None),
        "clean_with_leaks": set_at("clean", True),
        "audited_at_not_a_date_time": set_at("audited_at", "yesterday"),
        "missing_leaks": set_at("leaks", DELETE),
    },
)
V2_INVALID = mutated(
    V2,
    {
        "information_null": set_at("information", None),
        "leak_source_null": set_at("leaks.0.source", None),
        "missing_information": set_at("information", DELETE),
        "actor_written_date_leak": set_at("leaks.0.identifier_kind", "date"),
        "clean_with_leaks": set_at("clean", True),
        "information_handed": set_at("information.0.source", "handed"),
    },
)
OLDER_INVALID = V1_INVALID + V2_INVALID


@pytest.mark.parametrize(
    ("name", "doc"), OLDER_INVALID, ids=[f"{d['schema'][-2:]}-{n}" for n, d in OLDER_INVALID]
)
def test_an_older_verdict_its_frozen_schema_refuses_is_refused_naming_its_version(
    name: str, doc: Doc
) -> None:
    with pytest.raises(RecordRefusedError) as refused:
        upgrade_verdict(doc)
    assert refused.value.version == doc["schema"]
    assert str(refused.value).startswith(f"does not match {doc['schema']}: ")


# A verdict listing its information whose leak says no source, and one without its
# information whose leak says one: each field in range (the generated schema cannot see
# more), and the model refuses it.
MODEL_ONLY = mutated(
    CURRENT,
    {
        "source_null_beside_information": set_at("leaks.0.source", None),
        "information_null_beside_a_source": set_at("information", None),
    },
)


@pytest.mark.parametrize(("name", "doc"), MODEL_ONLY, ids=[n for n, _ in MODEL_ONLY])
def test_what_only_the_model_can_check_is_refused_naming_the_version(name: str, doc: Doc) -> None:
    assert schema_errors(AUDIT_SCHEMA, doc) == []
    with pytest.raises(RecordRefusedError) as refused:
        upgrade_verdict(doc)
    assert refused.value.version == AUDIT_SCHEMA
    assert str(refused.value).startswith(f"does not match {AUDIT_SCHEMA}: ")


@pytest.mark.parametrize(
    "doc",
    [
        {**V2, "schema": "mailroom.audit/v4"},
        {**V2, "schema": "mailroom.audit/v0"},
        {**V2, "schema": "mailroom.plan/v3"},
        {key: value for key, value in V2.items() if key != "schema"},
        [V2],
        "a verdict",
        None,
    ],
)
def test_a_version_this_code_does_not_know_is_refused(doc: object) -> None:
    with pytest.raises(RecordRefusedError) as refused:
        upgrade_verdict(doc)
    assert refused.value.version is None
    assert str(refused.value).startswith("is not an audit verdict: ")


def test_upgrading_leaves_the_document_as_it_was() -> None:
    doc: dict[str, Any] = copy.deepcopy(V1)
    upgrade_verdict(doc)
    assert doc == V1


def test_a_verdict_is_written_in_the_current_version_only() -> None:
    verdict = AuditVerdict(
        run_id="run-1",
        audited_at="2026-12-02T18:00:00.000Z",
        attempts_scanned=0,
        files_scanned=0,
        unverifiable=[],
        leaks=[],
        information=[],
        clean=True,
    )
    assert verdict.document()["schema"] == AUDIT_SCHEMA
    assert schema_errors(AUDIT_SCHEMA, verdict.document()) == []
    with pytest.raises(ValueError):
        AuditVerdict.model_validate({**verdict.document(), "schema": "mailroom.audit/v2"})
