"""Selection plans: contents, content hash, schema/model agreement, typed refusals."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mailroom.benchmarks.libero.catalog import (
    EQUIVALENT_CATALOGS,
    catalog_bytes,
    catalog_sha256,
    load_catalog,
)
from mailroom.mailbox.schemas import load_schema, schema_errors
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.entries import TaskIndexError, UnknownSuiteError
from mailroom.orchestrator.catalog.plans import (
    PLAN_SCHEMA,
    Plan,
    PlanCase,
    PlanCatalogMismatchError,
    PlanExistsError,
    PlanHashMismatchError,
    PlanInvalidError,
    PlanOptionError,
    content_sha256,
    write_plan,
)
from mailroom.orchestrator.families.plans import build_plan, load_plan, parse_plan
from pydantic import ValidationError

PLAN_V1 = "mailroom.plan/v1"


def _pairs(plan: Plan) -> list[tuple[str, int, int]]:
    return [(c.suite, c.task_index, c.init_state_index) for c in plan.cases]


def _fixed(plan: Plan) -> bool:
    return all(
        (c.init_state_index, c.seed, c.task_order_index) == (0, 20260907, 0) for c in plan.cases
    )


def test_fast_defaults_to_libero_10_tasks_0_and_1() -> None:
    plan = build_plan("fast")
    assert _pairs(plan) == [("libero_10", 0, 0), ("libero_10", 1, 0)]
    assert _fixed(plan) and plan.benchmark == "libero" and not plan.canonical_protocol
    assert plan.attempts_per_case == 1
    assert plan.catalog_sha256 == catalog_sha256()


def test_development_is_libero_10_tasks_0_to_4() -> None:
    plan = build_plan("development")
    assert _pairs(plan) == [("libero_10", i, 0) for i in range(5)]
    assert _fixed(plan)
    assert _pairs(build_plan("development", task_ids=[4, 2])) == [
        ("libero_10", 4, 0),
        ("libero_10", 2, 0),
    ]


def test_task_coverage_keeps_the_explicit_selection_and_order() -> None:
    plan = build_plan("task_coverage", suite="libero_90", task_ids=[89, 0, 45])
    assert _pairs(plan) == [("libero_90", 89, 0), ("libero_90", 0, 0), ("libero_90", 45, 0)]
    assert _fixed(plan)
    pro = build_plan("task_coverage", suite="libero_goal_swap", task_ids=[3])
    assert pro.benchmark == "libero_pro" and pro.cases[0].benchmark == "libero_pro"


def test_all_is_the_130_standard_entries_once_in_catalog_order() -> None:
    plan = build_plan("all")
    standard = [e for e in load_catalog().entries if e.benchmark == "libero"]
    assert _pairs(plan) == [(e.suite, e.task_index, 0) for e in standard]
    assert len(plan.cases) == len(set(plan.cases)) == 130
    assert _fixed(plan)


def test_canonical_interleaves_every_task_over_50_states_with_seed_7() -> None:
    plan = build_plan("canonical", suite="libero_spatial")
    assert len(plan.cases) == 500
    expected = [("libero_spatial", t, s) for s in range(50) for t in range(10)]
    assert _pairs(plan) == expected
    assert _pairs(plan)[:3] == [("libero_spatial", t, 0) for t in range(3)]
    assert _pairs(plan)[10] == ("libero_spatial", 0, 1)
    assert all(c.seed == 7 and c.task_order_index == 0 for c in plan.cases)
    assert plan.canonical_protocol and plan.kind == "canonical"
    assert plan.label.startswith("CANONICAL")
    assert "50 published fixed initial states, seed 7" in plan.description


def test_canonical_covers_pro_suites_and_libero_90() -> None:
    pro = build_plan("canonical", suite="libero_10_lan")
    assert pro.benchmark == "libero_pro" and len(pro.cases) == 500
    assert "LIBERO-PRO" in pro.description
    assert len(build_plan("canonical", suite="libero_90").cases) == 4500


def test_plan_hash_covers_everything_else_and_is_deterministic() -> None:
    plan = build_plan("canonical", suite="libero_goal")
    document = plan.document()
    body = {k: v for k, v in document.items() if k != "plan_sha256"}
    compact = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert plan.plan_sha256 == hashlib.sha256(compact.encode("utf-8")).hexdigest()
    assert build_plan("canonical", suite="libero_goal") == plan
    assert build_plan("fast").plan_sha256 != build_plan("development").plan_sha256


@pytest.mark.parametrize(
    ("kind", "suite", "task_ids", "error", "message"),
    [
        ("canonical", None, None, PlanOptionError, "needs a suite"),
        ("canonical", "libero_10", [0], PlanOptionError, "takes no task ids"),
        ("canonical", "libero_100", None, UnknownSuiteError, "unknown suite 'libero_100'"),
        ("task_coverage", "libero_10", None, PlanOptionError, "explicit suite and task ids"),
        ("task_coverage", None, [0], PlanOptionError, "explicit suite and task ids"),
        ("task_coverage", "libero_10", [0, 10], TaskIndexError, "no task index 10"),
        ("task_coverage", "libero_10", [-1], TaskIndexError, "no task index -1"),
        ("task_coverage", "libero_10", [], PlanOptionError, "at least one task"),
        ("task_coverage", "libero_10", [2, 2], PlanOptionError, "each case once"),
        ("fast", "nope", None, UnknownSuiteError, "unknown suite 'nope'"),
        ("development", "libero_goal", None, PlanOptionError, "libero_10 only"),
        ("development", None, [5], PlanOptionError, "task ids 0-4"),
        ("all", "libero_10", None, PlanOptionError, "takes no suite"),
        ("all", None, [0], PlanOptionError, "takes no task ids"),
        ("everything", None, None, PlanOptionError, "unknown plan kind"),
    ],
)
def test_bad_options_raise_typed_errors(
    kind: str, suite: str | None, task_ids: list[int] | None, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        build_plan(kind, suite=suite, task_ids=task_ids)


def test_write_then_load_round_trips(tmp_path: Path) -> None:
    plan = build_plan("canonical", suite="libero_object_swap")
    path = write_plan(plan, tmp_path / "plans" / "p.json")
    assert load_plan(path) == plan
    assert write_plan(plan, path) == path  # identical: left as it is
    with pytest.raises(PlanExistsError):
        write_plan(build_plan("fast"), path)
    write_plan(build_plan("fast"), path, overwrite=True)
    assert load_plan(path).kind == "fast"
    assert [c.case_id for c in load_plan(path).to_cases()] == [
        Case(suite="libero_10", task_index=i, init_state_index=0, seed=20260907).case_id
        for i in (0, 1)
    ]


def _write(tmp_path: Path, document: object, *, rehash: bool) -> Path:
    if rehash and isinstance(document, dict):
        document["plan_sha256"] = content_sha256(document)
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_a_tampered_plan_is_refused(tmp_path: Path) -> None:
    document = build_plan("fast").document()
    document["cases"][1]["init_state_index"] = 7
    with pytest.raises(PlanHashMismatchError, match="changed after it was built"):
        load_plan(_write(tmp_path, document, rehash=False))
    relabelled = build_plan("fast").document()
    relabelled["label"] = "canonical reproduction"
    with pytest.raises(PlanHashMismatchError):
        load_plan(_write(tmp_path, relabelled, rehash=False))


def test_load_refuses_malformed_and_foreign_plans(tmp_path: Path) -> None:
    base = build_plan("fast").document()
    extra = {**copy.deepcopy(base), "retry": True}
    with pytest.raises(PlanInvalidError, match=r"does not match mailroom\.plan/v3"):
        load_plan(_write(tmp_path, extra, rehash=True))
    path = tmp_path / "dup.json"
    path.write_text('{"schema": "mailroom.plan/v1", "schema": "x"}', encoding="utf-8")
    with pytest.raises(PlanInvalidError, match="duplicate key"):
        load_plan(path)
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(PlanInvalidError, match="UTF-8 JSON"):
        load_plan(path)
    with pytest.raises(PlanInvalidError, match="cannot read"):
        load_plan(tmp_path / "missing.json")
    foreign = copy.deepcopy(base)
    foreign["catalog_sha256"] = "0" * 64
    with pytest.raises(PlanCatalogMismatchError, match="rebuild the plan"):
        load_plan(_write(tmp_path, foreign, rehash=True))
    assert load_plan(_write(tmp_path, foreign, rehash=False), check_catalog=False).kind == "fast"
    out_of_range = copy.deepcopy(base)
    out_of_range["cases"][0]["init_state_index"] = 50
    with pytest.raises(PlanInvalidError, match="50 released initial states"):
        load_plan(_write(tmp_path, out_of_range, rehash=True))
    unknown = copy.deepcopy(base)
    unknown["cases"][0]["suite"] = "libero_10_env"
    with pytest.raises(PlanInvalidError, match="unknown suite"):
        load_plan(_write(tmp_path, unknown, rehash=True))


@pytest.mark.parametrize("version", [PLAN_V1, "mailroom.plan/v2", PLAN_SCHEMA])
def test_schema_is_frozen_draft_2020_12_and_matches_the_model(version: str) -> None:
    schema = load_schema(version)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"https://mailroom.invalid/schemas/{version}"
    aliases = {f.alias or name for name, f in Plan.model_fields.items()}
    assert aliases == set(schema["properties"]) == set(schema["required"])
    case_schema = schema["$defs"]["case"]
    assert (
        set(PlanCase.model_fields) == set(case_schema["properties"]) == set(case_schema["required"])
    )
    assert set(PlanCase.model_fields) == set(Case.model_fields)


Change = Callable[[dict[str, Any]], object]
MUTATIONS: dict[str, Change] = {
    "unknown kind": lambda d: d.update(kind="full"),
    "canonical flag off": lambda d: d.update(canonical_protocol=False),
    "benchmark mismatch": lambda d: d["cases"][3].update(benchmark="libero_pro"),
    "missing label": lambda d: d.pop("label"),
    "extra case field": lambda d: d["cases"][0].update(attempt=2),
    "negative task": lambda d: d["cases"][0].update(task_index=-1),
    "string task": lambda d: d["cases"][0].update(task_index="0"),
    "bool seed": lambda d: d["cases"][0].update(seed=True),
    "huge seed": lambda d: d["cases"][0].update(seed=2**32),
    "retried": lambda d: d.update(attempts_per_case=2),
    "no cases": lambda d: d.update(cases=[]),
    "short hash": lambda d: d.update(catalog_sha256="abc"),
    "wrong schema": lambda d: d.update(schema="mailroom.plan/v9"),
}


def test_schema_and_model_agree_on_valid_and_invalid_plans() -> None:
    for kind, suite in (("fast", None), ("all", None), ("canonical", "libero_goal_lan")):
        document = build_plan(kind, suite=suite).document()
        assert document["schema"] == PLAN_SCHEMA
        assert schema_errors(PLAN_SCHEMA, document) == []
        assert Plan.model_validate(document).document() == document
    valid = build_plan("canonical", suite="libero_10").document()
    for name, change in MUTATIONS.items():
        for version in (PLAN_SCHEMA, PLAN_V1):
            document = as_version(copy.deepcopy(valid), version)
            change(document)
            # v3 names any registered family, so a case of another family is refused by
            # the model (and the loader), not the schema.
            if not (name == "benchmark mismatch" and version == PLAN_SCHEMA):
                assert schema_errors(version, document), (name, version)
            if version == PLAN_SCHEMA:
                with pytest.raises(ValidationError):
                    Plan.model_validate(document)
            # Hashed as built: the loader refuses it for what it is, whatever its version.
            document["plan_sha256"] = content_sha256(document)
            with pytest.raises(PlanInvalidError):
                parse_plan(json.dumps(document).encode(), check_catalog=False)


def as_version(document: dict[str, Any], version: str) -> dict[str, Any]:
    """A built plan as an earlier version wrote it (same content, its own hash)."""
    document = {**document, "schema": version}
    document["plan_sha256"] = content_sha256(document)
    return document


def test_a_version_1_plan_loads_as_version_3_with_its_own_hash(tmp_path: Path) -> None:
    for kind, suite in (("fast", None), ("canonical", "libero_goal_lan")):
        built = build_plan(kind, suite=suite)
        older = as_version(built.document(), PLAN_V1)
        assert schema_errors(PLAN_V1, older) == []
        loaded = load_plan(_write(tmp_path, older, rehash=False))
        assert loaded.schema_ == PLAN_SCHEMA and loaded.document() == {
            **older,
            "schema": PLAN_SCHEMA,
        }
        assert loaded.plan_sha256 == older["plan_sha256"] != built.plan_sha256
        assert loaded.to_cases() == built.to_cases()


def test_a_repeated_case_is_refused_by_the_model_and_the_loader(tmp_path: Path) -> None:
    """The schema leaves uniqueness to loaders: uniqueItems is quadratic in the cases."""
    document = build_plan("development").document()
    document["cases"][1] = dict(document["cases"][0])
    assert schema_errors(PLAN_SCHEMA, document) == []
    with pytest.raises(ValidationError, match="never repeats a case"):
        Plan.model_validate(document)
    with pytest.raises(PlanInvalidError, match="never repeats a case"):
        load_plan(_write(tmp_path, document, rehash=True))


OLD_CATALOG_PATH = b"orchestrator/protocol/libero_catalog.json"
NEW_CATALOG_PATH = b"orchestrator/catalog/libero_catalog.json"


def test_a_plan_of_an_equivalent_earlier_catalog_still_loads(tmp_path: Path) -> None:
    """Each listed earlier catalog is the installed one with only the stated difference:
    rebuilding its bytes from today's file gives exactly its hash."""
    today = catalog_bytes()
    old_command = b" ".join(
        [b"python -m mailroom.orchestrator.catalog_build", b"--out", OLD_CATALOG_PATH]
    )
    new_command = b" ".join(
        [b"python -m mailroom.orchestrator.catalog.build", b"--out", NEW_CATALOG_PATH]
    )
    assert today.count(new_command) == 1
    earlier = hashlib.sha256(today.replace(new_command, old_command)).hexdigest()
    assert set(EQUIVALENT_CATALOGS) == {earlier}
    old_plan = build_plan("fast").document()
    old_plan["catalog_sha256"] = earlier
    loaded = load_plan(_write(tmp_path, old_plan, rehash=True))
    assert loaded.catalog_sha256 == earlier and loaded.to_cases() == build_plan("fast").to_cases()
