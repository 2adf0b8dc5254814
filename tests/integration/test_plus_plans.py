"""LIBERO-Plus plans (`mailroom.plan/v3`, `mailroom.plan/v2` before it): contents,
refusals, which layer refuses what, and version-1 and version-2 plans read as they were
written, each with its own hash."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from jsonschema import Draft202012Validator
from mailroom.benchmarks.libero.catalog import catalog_sha256
from mailroom.benchmarks.libero_plus.catalog import (
    PLUS_CATEGORIES,
    PlusCatalog,
    PlusEntry,
    load_plus_catalog,
    plus_catalog_sha256,
)
from mailroom.mailbox.schemas import load_schema, schema_errors
from mailroom.orchestrator.catalog.entries import TaskIndexError, UnknownSuiteError
from mailroom.orchestrator.catalog.plans import (
    PLAN_SCHEMA,
    Plan,
    PlanCatalogMismatchError,
    PlanHashMismatchError,
    PlanInvalidError,
    PlanOptionError,
    PlanRefusedError,
    content_sha256,
    render_plan,
    write_plan,
)
from mailroom.orchestrator.families.plans import build_plan, load_plan, parse_plan
from mailroom.orchestrator.records.upgrade import PLAN_HISTORY, upgraded_document
from pydantic import ValidationError

PLAN_V1, PLAN_V2 = "mailroom.plan/v1", "mailroom.plan/v2"

PLUS_SUITES = ("libero_plus_spatial", "libero_plus_object", "libero_plus_goal", "libero_plus_10")
OFFLINE_CATEGORIES = ("camera", "robot_init", "language", "noise", "layout", "background")
# The hashes of version-1 plans as the code before LIBERO-Plus built them (same catalog).
V1_PLAN_HASHES = {
    ("development", None): "9db71ca6c87ce4e02774ad151d37825a50bed39b10a76bd023c23bcf76737d3c",
    ("fast", None): "a75225885188653018112f19e3aedaac2b938312124722e1f889143b7bdedb74",
    ("all", None): "2c5996d3ab35fd0281d0845db3b84b6ea02e04869aed13a051a6884401640bb3",
    ("canonical", "libero_10"): "82bbd7ce267e53f83d9bb4d37c8be525c66a4e36f4182974d937d7a05e95fbff",
    ("canonical", "libero_goal_lan"): (
        "0ac3f7db5fe2fb539d8c9aab9fa4af6ac79ab5febd7faa1167736e9ab50e1fcf"
    ),
}


@pytest.fixture(scope="module")
def frozen() -> PlusCatalog:
    return load_plus_catalog()


def _selected(plan: Plan) -> list[tuple[str, int]]:
    return [(c.suite, c.task_index) for c in plan.cases]


def _keys(entries: list[PlusEntry]) -> list[tuple[str, int]]:
    return [(e.suite, e.task_index) for e in entries]


def _settings(plan: Plan) -> set[tuple[str, int, int, int]]:
    return {(c.benchmark, c.init_state_index, c.seed, c.task_order_index) for c in plan.cases}


def as_version(document: dict[str, Any], version: str) -> dict[str, Any]:
    """A built plan as an earlier version wrote it (same content, its own hash)."""
    document = {**document, "schema": version}
    document["plan_sha256"] = content_sha256(document)
    return document


def _is_plus_v2(plan: Plan) -> bool:
    """A new LIBERO-Plus plan: version 3 (version 2 before it), on the Plus catalog."""
    return (
        plan.schema_ == PLAN_SCHEMA
        and plan.document()["schema"] == "mailroom.plan/v3"
        and plan.benchmark == "libero_plus"
        and plan.catalog_sha256 == plus_catalog_sha256()
        and plan.catalog_sha256 != catalog_sha256()
    )


@pytest.mark.parametrize("suite", PLUS_SUITES)
def test_fast_is_the_first_offline_task_of_each_category(frozen: PlusCatalog, suite: str) -> None:
    plan = build_plan("fast", suite=suite)
    entries = [e for e in frozen.entries if e.suite == suite]
    present = [c for c in PLUS_CATEGORIES if any(e.category == c for e in entries)]
    expected = [next(e for e in entries if e.category == c) for c in present]
    assert _selected(plan) == _keys(expected)
    assert [frozen.entry(suite, c.task_index).category for c in plan.cases] == present
    assert present == (
        list(OFFLINE_CATEGORIES) if suite == "libero_plus_object" else list(OFFLINE_CATEGORIES[:5])
    )
    assert _settings(plan) == {("libero_plus", 0, 20260907, 0)}
    assert _is_plus_v2(plan) and plan.kind == "fast" and not plan.canonical_protocol
    assert Plan.model_validate(plan.document()) == plan


def test_fast_with_task_ids_and_its_refusals(frozen: PlusCatalog) -> None:
    goal = frozen.suite_entries("libero_plus_goal")
    chosen = [goal[5].task_index, goal[0].task_index]
    plan = build_plan("fast", suite="libero_plus_goal", task_ids=chosen)
    assert _selected(plan) == [("libero_plus_goal", i) for i in chosen]
    with pytest.raises(PlanOptionError, match="plan kind 'fast' takes no category"):
        build_plan("fast", suite="libero_plus_goal", category="camera")
    with pytest.raises(UnknownSuiteError, match="unknown suite 'libero_plus_90'"):
        build_plan("fast", suite="libero_plus_90")


def test_task_coverage_by_category_is_all_its_offline_tasks_in_order(
    frozen: PlusCatalog,
) -> None:
    for category in OFFLINE_CATEGORIES:
        entries = [
            e for e in frozen.entries if e.suite == "libero_plus_object" and e.category == category
        ]
        plan = build_plan("task_coverage", suite="libero_plus_object", category=category)
        assert _selected(plan) == _keys(entries)
        assert [c.task_index for c in plan.cases] == sorted(c.task_index for c in plan.cases)
        assert _settings(plan) == {("libero_plus", 0, 20260907, 0)}
        assert _is_plus_v2(plan) and plan.kind == "task_coverage"
        assert f"({len(entries)})" in plan.label


def test_task_coverage_refusals(frozen: PlusCatalog) -> None:
    goal = frozen.suite_entries("libero_plus_goal")
    camera = [e.task_index for e in goal if e.category == "camera"][:2]
    language = next(e.task_index for e in goal if e.category == "language")
    plan = build_plan("task_coverage", suite="libero_plus_goal", task_ids=camera, category="camera")
    assert _selected(plan) == [("libero_plus_goal", i) for i in camera]
    mixed = [camera[0], language]
    assert len(build_plan("task_coverage", suite="libero_plus_goal", task_ids=mixed).cases) == 2
    with pytest.raises(PlanOptionError, match=f"tasks {language} are not camera tasks"):
        build_plan("task_coverage", suite="libero_plus_goal", task_ids=mixed, category="camera")
    refused = next(x for x in frozen.excluded if x.suite == "libero_plus_goal")
    with pytest.raises(TaskIndexError) as caught:
        build_plan("task_coverage", suite="libero_plus_goal", task_ids=[refused.task_index])
    assert "cannot run offline" in str(caught.value)
    assert f"({refused.category})" in str(caught.value) and refused.reason in str(caught.value)
    with pytest.raises(PlanOptionError, match="needs task ids or a category"):
        build_plan("task_coverage", suite="libero_plus_goal")
    with pytest.raises(PlanOptionError, match="has no offline light tasks"):
        build_plan("task_coverage", suite="libero_plus_goal", category="light")
    with pytest.raises(TaskIndexError, match="no task index 2591"):
        build_plan("task_coverage", suite="libero_plus_goal", task_ids=[2591])
    with pytest.raises(PlanOptionError, match="each case once"):
        build_plan("task_coverage", suite="libero_plus_goal", task_ids=[camera[0], camera[0]])
    with pytest.raises(UnknownSuiteError, match="unknown LIBERO-Plus category 'lighting'"):
        build_plan("task_coverage", suite="libero_plus_goal", category="lighting")


@pytest.mark.parametrize("category", [None, "layout", "background"])
def test_canonical_is_every_offline_task_once_with_seed_7(
    frozen: PlusCatalog, category: str | None
) -> None:
    plan = build_plan("canonical", suite="libero_plus_object", category=category)
    entries = frozen.suite_entries("libero_plus_object", category)
    assert _selected(plan) == _keys(entries)
    assert len(plan.cases) == (1827 if category is None else len(entries))
    assert _settings(plan) == {("libero_plus", 0, 7, 0)}
    assert plan.canonical_protocol and plan.kind == "canonical" and _is_plus_v2(plan)
    assert plan.label.startswith("CANONICAL")


def test_canonical_refusals(frozen: PlusCatalog) -> None:
    first = frozen.suite_entries("libero_plus_goal")[0].task_index
    with pytest.raises(PlanOptionError, match="plan kind 'canonical' takes no task ids"):
        build_plan("canonical", suite="libero_plus_goal", task_ids=[first])
    with pytest.raises(PlanOptionError, match="has no offline added_objects tasks"):
        build_plan("canonical", suite="libero_plus_goal", category="added_objects")


@pytest.mark.parametrize(
    ("kind", "suite", "category", "message"),
    [
        ("development", "libero_plus_goal", None, "'development' covers standard LIBERO"),
        ("all", "libero_plus_10", None, "'all' covers standard LIBERO"),
        ("all", "libero_plus_10", "camera", "'all' covers standard LIBERO"),
        ("task_coverage", "libero_10", "camera", "a category selects LIBERO-Plus tasks"),
        ("canonical", "libero_goal_lan", "noise", "a category selects LIBERO-Plus tasks"),
        ("fast", None, "camera", "a category selects LIBERO-Plus tasks"),
    ],
)
def test_kinds_and_categories_outside_libero_plus_are_refused(
    kind: str, suite: str | None, category: str | None, message: str
) -> None:
    with pytest.raises(PlanOptionError, match=message):
        build_plan(kind, suite=suite, task_ids=None, category=category)


@pytest.mark.parametrize(("kind", "suite"), list(V1_PLAN_HASHES))
def test_version_1_plans_are_unchanged(kind: str, suite: str | None) -> None:
    """A plan is written as version 3 now; labelled version 1 it is, byte for byte in
    its content hash, the plan version 1 wrote, and it still loads (as version 3, with
    the hash it was written with)."""
    plan = build_plan(kind, suite=suite)
    assert plan.schema_ == PLAN_SCHEMA
    assert parse_plan(render_plan(plan)) == plan
    document = as_version(plan.document(), PLAN_V1)
    assert document["plan_sha256"] == V1_PLAN_HASHES[(kind, suite)]
    assert plan.catalog_sha256 == catalog_sha256()
    assert schema_errors(PLAN_V1, document) == []
    loaded = parse_plan(json.dumps(document).encode())
    assert loaded.document() == {**document, "schema": PLAN_SCHEMA}
    assert loaded.plan_sha256 == V1_PLAN_HASHES[(kind, suite)]


def test_the_v2_schema_is_draft_2020_12_with_the_model_fields() -> None:
    schema = load_schema(PLAN_V2)
    Draft202012Validator.check_schema(schema)
    assert schema["$id"] == "https://mailroom.invalid/schemas/mailroom.plan/v2"
    assert schema["properties"]["schema"] == {"const": PLAN_V2}
    aliases = {f.alias or name for name, f in Plan.model_fields.items()}
    assert aliases == set(schema["properties"]) == set(schema["required"])
    v1 = load_schema(PLAN_V1)
    assert schema["$defs"]["case"] == v1["$defs"]["case"]


def _valid_documents() -> list[dict[str, Any]]:
    """LIBERO-Plus plans as version 2 wrote them."""
    return [
        as_version(plan.document(), PLAN_V2)
        for plan in (
            build_plan("fast", suite="libero_plus_goal"),
            build_plan("task_coverage", suite="libero_plus_10", category="camera"),
            build_plan("canonical", suite="libero_plus_object", category="background"),
        )
    ]


def _upgraded(document: dict[str, Any]) -> dict[str, Any]:
    """An earlier version's plan as version 3 (its hash the one it was written with)."""
    return upgraded_document(PLAN_HISTORY, document)


def test_valid_v2_documents_pass_the_schema_and_the_model() -> None:
    for document in _valid_documents():
        assert schema_errors(PLAN_V2, document) == []
        assert schema_errors(PLAN_V1, document) != []  # v1 knows no libero_plus
        assert Plan.model_validate(_upgraded(document)).document() == {
            **document,
            "schema": PLAN_SCHEMA,
        }
        assert parse_plan(json.dumps(document).encode()).plan_sha256 == document["plan_sha256"]


Change = Callable[[dict[str, Any]], object]


def _relabel(benchmark: str) -> Change:
    """The plan and every case moved to another benchmark."""

    def change(document: dict[str, Any]) -> None:
        document["benchmark"] = benchmark
        for case in document["cases"]:
            case["benchmark"] = benchmark

    return change


# Refused by the v2 schema, so by the loader naming v2 (an unknown version: naming none).
BOTH_REFUSE: dict[str, Change] = {
    "a case of another benchmark": lambda d: d["cases"][1].update(benchmark="libero"),
    "unknown benchmark": _relabel("libero_max"),
    "unknown kind": lambda d: d.update(kind="perturbed"),
    "canonical flag on": lambda d: d.update(canonical_protocol=True),
    "extra field": lambda d: d.update(category="camera"),
    "extra case field": lambda d: d["cases"][0].update(category="camera"),
    "negative task": lambda d: d["cases"][0].update(task_index=-1),
    "string task": lambda d: d["cases"][0].update(task_index="0"),
    "retried": lambda d: d.update(attempts_per_case=2),
    "no cases": lambda d: d.update(cases=[]),
    "short hash": lambda d: d.update(catalog_sha256="abc"),
    "unknown version": lambda d: d.update(schema="mailroom.plan/v9"),
}


def _mutated(change: Change) -> dict[str, Any]:
    document = as_version(build_plan("fast", suite="libero_plus_goal").document(), PLAN_V2)
    change(document)
    return document


@pytest.mark.parametrize("name", list(BOTH_REFUSE))
def test_schema_and_loader_refuse_alike(name: str) -> None:
    document = _mutated(BOTH_REFUSE[name])
    assert schema_errors(PLAN_V2, document), name
    document["plan_sha256"] = content_sha256(document)
    with pytest.raises(PlanRefusedError) as refused:
        parse_plan(json.dumps(document).encode(), check_catalog=False)
    assert refused.value.version == (PLAN_V2 if document["schema"] == PLAN_V2 else None)


def _write(tmp_path: Path, document: dict[str, Any]) -> Path:
    document["plan_sha256"] = content_sha256(document)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_libero_plus_under_schema_v1_is_refused_by_schema_and_loader(
    tmp_path: Path,
) -> None:
    document = _mutated(lambda d: d.update(schema=PLAN_V1))
    errors = schema_errors(PLAN_V1, document)
    assert any("benchmark" in e for e in errors), errors
    with pytest.raises(ValidationError):
        Plan.model_validate(document)
    with pytest.raises(PlanInvalidError, match=r"does not match mailroom\.plan/v1"):
        load_plan(_write(tmp_path, document))


def test_what_only_the_model_or_the_loader_refuses(frozen: PlusCatalog, tmp_path: Path) -> None:
    # Plus cases relabelled LIBERO-Para: a well-formed label, so only the loader, which
    # checks the plan against the LIBERO-Para catalog of a declared copy, refuses it.
    para = _mutated(_relabel("libero_para"))
    assert schema_errors(PLAN_V2, para) == []
    Plan.model_validate(_upgraded(para))
    with pytest.raises(PlanCatalogMismatchError):
        load_plan(_write(tmp_path, para))
    # A repeated case: uniqueness is the model's, not the schema's.
    repeated = _mutated(lambda d: d["cases"].__setitem__(1, dict(d["cases"][0])))
    assert schema_errors(PLAN_V2, repeated) == []
    with pytest.raises(ValidationError, match="never repeats a case"):
        Plan.model_validate(_upgraded(repeated))
    with pytest.raises(PlanInvalidError, match="never repeats a case"):
        load_plan(_write(tmp_path, repeated))
    # Cases the Plus catalog does not run: only the loader, which reads the catalog, knows.
    refused = next(x for x in frozen.excluded if x.suite == "libero_plus_goal")
    excluded = _mutated(lambda d: d["cases"][0].update(task_index=refused.task_index))
    assert schema_errors(PLAN_V2, excluded) == []
    Plan.model_validate(_upgraded(excluded))
    with pytest.raises(
        PlanInvalidError, match=f"case 0: .*cannot run offline: {re.escape(refused.reason)}"
    ):
        load_plan(_write(tmp_path, excluded))
    standard = _mutated(lambda d: d["cases"][0].update(suite="libero_goal", task_index=0))
    Plan.model_validate(_upgraded(standard))
    with pytest.raises(PlanInvalidError, match="case 0: libero_goal belongs to libero"):
        load_plan(_write(tmp_path, standard))
    cases = build_plan("fast", suite="libero_plus_goal").cases
    layout = next(
        n for n, c in enumerate(cases) if frozen.entry(c.suite, c.task_index).category == "layout"
    )
    second_state = _mutated(lambda d: d["cases"][layout].update(init_state_index=1))
    Plan.model_validate(_upgraded(second_state))
    with pytest.raises(PlanInvalidError, match="has 1 released initial states, not 2"):
        load_plan(_write(tmp_path, second_state))
    beyond = _mutated(lambda d: d["cases"][0].update(task_index=2591))
    with pytest.raises(PlanInvalidError, match="no task index 2591"):
        load_plan(_write(tmp_path, beyond))


def test_a_standard_plan_labelled_v2_is_refused(tmp_path: Path) -> None:
    """One selection, one document: a LIBERO or LIBERO-PRO plan is version 1 only."""
    document = build_plan("fast").document()
    document["schema"] = PLAN_V2
    assert schema_errors(PLAN_V2, document)
    with pytest.raises(PlanInvalidError, match=r"does not match mailroom\.plan/v2"):
        load_plan(_write(tmp_path, document))


def test_write_then_load_round_trips_and_catalog_identity_is_checked(tmp_path: Path) -> None:
    plan = build_plan("task_coverage", suite="libero_plus_spatial", category="noise")
    path = write_plan(plan, tmp_path / "plans" / "plus.json")
    assert path.read_bytes() == render_plan(plan)
    assert load_plan(path) == plan
    assert [c.case_id for c in load_plan(path).to_cases()] == [c.case_id for c in plan.to_cases()]
    edited = plan.document()
    edited["cases"][0]["seed"] = 7
    (tmp_path / "edited.json").write_text(json.dumps(edited), encoding="utf-8")
    with pytest.raises(PlanHashMismatchError):
        load_plan(tmp_path / "edited.json")
    for foreign in ("0" * 64, catalog_sha256()):
        document = plan.document()
        document["catalog_sha256"] = foreign
        with pytest.raises(PlanCatalogMismatchError, match="rebuild the plan"):
            load_plan(_write(tmp_path, document))
        assert load_plan(_write(tmp_path, document), check_catalog=False).catalog_sha256 == foreign
    standard = build_plan("fast").document()
    standard["catalog_sha256"] = plus_catalog_sha256()
    with pytest.raises(PlanCatalogMismatchError):
        load_plan(_write(tmp_path, standard))


def test_cli_writes_a_category_plan(frozen: PlusCatalog, tmp_path: Path) -> None:
    out = tmp_path / "camera.json"
    proc = run_cli(
        "plan",
        "--kind",
        "task_coverage",
        "--suite",
        "libero_plus_goal",
        "--category",
        "camera",
        "--out",
        str(out),
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert json.loads(out.read_text(encoding="utf-8")) == document
    camera = frozen.suite_entries("libero_plus_goal", "camera")
    assert len(document["cases"]) == len(camera) == 408
    assert [c["task_index"] for c in document["cases"]] == [e.task_index for e in camera]
    assert document["schema"] == PLAN_SCHEMA and document["benchmark"] == "libero_plus"
    assert document["catalog_sha256"] == plus_catalog_sha256()
    assert load_plan(out) == build_plan(
        "task_coverage", suite="libero_plus_goal", category="camera"
    )
    assert "408 cases" in proc.stderr


def test_cli_refuses_a_category_of_a_standard_suite(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    for args, message in (
        (["--suite", "libero_10", "--category", "camera"], "a category selects LIBERO-Plus"),
        (["--suite", "libero_plus_goal", "--category", "lights"], "Invalid value for '--category'"),
        (["--suite", "libero_plus_goal"], "needs task ids or a category"),
    ):
        proc = run_cli("plan", "--kind", "task_coverage", *args, "--out", str(out))
        assert proc.returncode == 2, proc.stderr
        assert message in proc.stderr
        assert "Traceback" not in proc.stderr + proc.stdout and proc.stdout == ""
        assert not out.exists()
