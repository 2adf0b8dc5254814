"""Plans of every version read as the current one, `mailroom.plan/v3` (`records/upgrade.py`
through `families/plans.py`).

A plan is content-addressed, so an older one is checked against its own frozen schema
and its hash recomputed over the document as written before it is upgraded; the plan
read keeps that hash. `tests/support/data/older_records/plan.v1.*` and `plan.v2.*` are plans of
`tests/support/data/plans_before_init_states/` as versions 1 and 2 wrote them (same content,
their own hashes), checked against the frozen schemas.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.catalog.plans import (
    PLAN_SCHEMA,
    PlanError,
    PlanHashMismatchError,
    PlanInvalidError,
    PlanRefusedError,
    content_sha256,
    render_plan,
)
from mailroom.orchestrator.families.plans import load_plan, parse_plan
from mailroom.orchestrator.records.upgrade import (
    PLAN_HISTORY,
    RecordRefusedError,
    upgraded_document,
)

OLDER = REPO / "tests" / "support" / "data" / "older_records"
BEFORE = REPO / "tests" / "support" / "data" / "plans_before_init_states"
# Each older plan, and the current plan of the same content.
OLDER_PLANS = {
    "plan.v1.libero_10_t0.json": ("mailroom.plan/v1", "libero_10_t0.json"),
    "plan.v2.libero_plus_10_t289_1946.json": (
        "mailroom.plan/v2",
        "libero_plus_10_t289_1946.json",
    ),
}


def _read(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def _bytes(document: dict[str, Any], *, rehash: bool) -> bytes:
    document = copy.deepcopy(document)
    if rehash:
        document["plan_sha256"] = content_sha256(document)
    return json.dumps(document).encode()


def test_the_history_ends_at_the_frozen_v3() -> None:
    assert PLAN_HISTORY.current == PLAN_SCHEMA == "mailroom.plan/v3"
    assert PLAN_HISTORY.versions == ("mailroom.plan/v1", "mailroom.plan/v2", PLAN_SCHEMA)
    assert not PLAN_HISTORY.generated


@pytest.mark.parametrize("name", sorted(OLDER_PLANS))
def test_an_older_plan_reads_as_v3_with_the_hash_it_was_written_with(name: str) -> None:
    version, same = OLDER_PLANS[name]
    written = _read(OLDER / name)
    assert written["schema"] == version and schema_errors(version, written) == []
    plan = load_plan(OLDER / name)  # checked against the installed catalog too
    current = load_plan(BEFORE / same)
    assert plan.schema_ == PLAN_SCHEMA
    assert plan.document() == {**written, "schema": PLAN_SCHEMA}
    assert plan.plan_sha256 == written["plan_sha256"] != current.plan_sha256
    assert plan.model_copy(update={"plan_sha256": current.plan_sha256}) == current
    assert plan.to_cases() == current.to_cases()


@pytest.mark.parametrize("name", sorted(OLDER_PLANS))
def test_an_older_plan_is_never_written_again(name: str) -> None:
    """Its hash is of the document as written: the bytes to keep are that file's."""
    plan = load_plan(OLDER / name)
    with pytest.raises(PlanError, match="keep the file it was read from"):
        render_plan(plan)


@pytest.mark.parametrize("same", sorted(p.name for p in BEFORE.glob("*.json")))
def test_a_current_plan_reads_and_renders_as_it_was_written(same: str) -> None:
    data = (BEFORE / same).read_bytes()
    assert render_plan(parse_plan(data, check_catalog=False)) == data


@pytest.mark.parametrize(
    "path",
    [OLDER / name for name in sorted(OLDER_PLANS)] + [BEFORE / "libero_10_t0.json"],
    ids=lambda p: p.name,
)
def test_an_edited_plan_of_any_version_is_refused(path: Path) -> None:
    written = _read(path)
    edited = copy.deepcopy(written)
    edited["cases"][0]["seed"] = 7
    with pytest.raises(PlanHashMismatchError, match="changed after it was built"):
        parse_plan(_bytes(edited, rehash=False), check_catalog=False)
    relabelled = {**written, "description": written["description"] + " Reproduction."}
    with pytest.raises(PlanHashMismatchError):
        parse_plan(_bytes(relabelled, rehash=False), check_catalog=False)


@pytest.mark.parametrize("name", sorted(OLDER_PLANS))
def test_an_older_plan_relabelled_current_is_an_edited_plan(name: str) -> None:
    """Its hash covers the version it names: labelled v3 without a new hash, it is one
    v3 never wrote."""
    relabelled = {**_read(OLDER / name), "schema": PLAN_SCHEMA}
    assert schema_errors(PLAN_SCHEMA, relabelled) == []
    with pytest.raises(PlanHashMismatchError):
        parse_plan(_bytes(relabelled, rehash=False), check_catalog=False)


@pytest.mark.parametrize(
    ("name", "change", "problem"),
    [
        ("plan.v1.libero_10_t0.json", {"benchmark": "libero_plus"}, "libero_plus"),
        ("plan.v1.libero_10_t0.json", {"retry": True}, "retry"),
        ("plan.v2.libero_plus_10_t289_1946.json", {"benchmark": "libero"}, "libero"),
        ("plan.v2.libero_plus_10_t289_1946.json", {"kind": "perturbed"}, "perturbed"),
    ],
)
def test_what_its_versions_schema_refuses_is_refused_naming_its_version(
    name: str, change: dict[str, Any], problem: str
) -> None:
    document = {**_read(OLDER / name), **change}
    version = document["schema"]
    with pytest.raises(PlanRefusedError) as refused:
        parse_plan(_bytes(document, rehash=True), check_catalog=False)
    assert refused.value.version == version and problem in refused.value.problem
    assert str(refused.value).startswith(f"does not match {version}: ")
    assert isinstance(refused.value, PlanInvalidError)  # what `mailroom launch` refuses


def test_what_only_the_model_refuses_is_refused_naming_the_version_written() -> None:
    document = _read(OLDER / "plan.v2.libero_plus_10_t289_1946.json")
    document["cases"][1] = dict(document["cases"][0])
    assert schema_errors("mailroom.plan/v2", document) == []
    with pytest.raises(PlanRefusedError, match="never repeats a case") as refused:
        parse_plan(_bytes(document, rehash=True), check_catalog=False)
    assert refused.value.version == "mailroom.plan/v2"


@pytest.mark.parametrize("schema", ["mailroom.plan/v4", "mailroom.plan/v0", "mailroom.audit/v1"])
def test_a_plan_of_a_version_this_code_does_not_know_is_refused(schema: str) -> None:
    document = {**_read(BEFORE / "libero_10_t0.json"), "schema": schema}
    with pytest.raises(RecordRefusedError) as refused:
        parse_plan(_bytes(document, rehash=True), check_catalog=False)
    assert refused.value.version is None
    assert str(refused.value).startswith("is not a plan: ")
    assert isinstance(refused.value, PlanInvalidError)


@pytest.mark.parametrize("document", [[], "a plan", None, 7])
def test_a_document_that_is_no_object_is_refused(document: object) -> None:
    with pytest.raises(RecordRefusedError, match="is not a plan: not a JSON object"):
        parse_plan(json.dumps(document).encode(), check_catalog=False)


def test_upgrading_leaves_the_document_as_it_was() -> None:
    written = _read(OLDER / "plan.v1.libero_10_t0.json")
    kept = copy.deepcopy(written)
    upgraded = upgraded_document(PLAN_HISTORY, written)
    assert written == kept and upgraded == {**kept, "schema": PLAN_SCHEMA}
