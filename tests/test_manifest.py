"""The run manifest records every declared setting, the outbox durability included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.actors.confinement import ConfinementSettings
from mailroom.orchestrator.campaign.manifest import (
    EXTERNAL_ACTORS,
    ManifestConflictError,
    as_recorded_by,
    build_manifest,
    check_compatible,
)
from mailroom.orchestrator.cli.launch import _settings_from, launch
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.families.plans import build_plan
from mailroom.orchestrator.families.registry import run_family_errors
from mailroom.orchestrator.records.manifest import (
    MANIFEST_SCHEMA,
    MANIFEST_SCHEMA_V3,
    MANIFEST_SCHEMA_V4,
    RunEnforcement,
    manifest_errors,
)
from pydantic import ValidationError


def external_manifest(tmp_path: Path, settings: RunSettings) -> dict[str, Any]:
    """A manifest of the fast plan for external actors, as a launch would write it."""
    plan = build_plan("fast")
    return build_manifest(
        run_id="run-manifest-test",
        plan_sha256=plan.plan_sha256,
        plan_kind=plan.kind,
        n_cases=len(plan.cases),
        profile_name="scripted_diagnostic",
        profile_declaration={"profile": "scripted_diagnostic", "capability_score": False},
        settings=settings,
        actor_command=None,
        record="minimal",
        run_dir=tmp_path / "run",
        mailbox_root=tmp_path / "mailboxes",
        workers=1,
        confinement=ConfinementSettings(mode="external"),
    )


@pytest.mark.parametrize("durability", ["atomic", "durable"])
def test_the_manifest_records_the_outbox_durability(tmp_path: Path, durability: str) -> None:
    settings = RunSettings.model_validate({"outbox_durability": durability})
    manifest = external_manifest(tmp_path, settings)
    assert manifest["settings"]["outbox_durability"] == durability
    assert RunSettings.model_validate(manifest["settings"]) == settings


def test_the_default_is_atomic_and_older_manifests_stay_valid(tmp_path: Path) -> None:
    manifest = external_manifest(tmp_path, RunSettings())
    assert manifest["settings"]["outbox_durability"] == "atomic"
    older = {**manifest, "settings": dict(manifest["settings"])}
    del older["settings"]["outbox_durability"]
    assert schema_errors(MANIFEST_SCHEMA, older) == []
    wrong = {**manifest, "settings": {**manifest["settings"], "outbox_durability": "fsync"}}
    assert schema_errors(MANIFEST_SCHEMA, wrong) != []


def test_launch_declares_the_outbox_durability() -> None:
    option = next(p for p in launch.params if p.name == "outbox_durability")
    assert isinstance(option, click.Option) and isinstance(option.type, click.Choice)
    assert list(option.type.choices) == ["atomic", "durable"]
    assert option.default == "atomic"
    named = {
        "plan_file",
        "profile",
        "run_dir",
        "mailbox_root",
        "actor",
        "confinement",
        "actor_paths",
        "workers",
        "record",
    }
    ctx = click.Context(launch)
    options = {
        p.name: p.get_default(ctx)
        for p in launch.params
        if p.name is not None and p.name not in {*named, "as_json"}
    }
    assert _settings_from(options) == RunSettings()
    assert _settings_from({**options, "outbox_durability": "durable"}).outbox_durability == (
        "durable"
    )


def test_manifest_v4_names_the_family_and_its_adapter(tmp_path: Path) -> None:
    manifest = external_manifest(tmp_path, RunSettings())
    assert manifest["schema"] == MANIFEST_SCHEMA
    assert manifest["protocol"]["benchmark"] == "libero"
    assert manifest["protocol"]["adapter"] == "libero"
    assert schema_errors(MANIFEST_SCHEMA, manifest) == []
    assert run_family_errors(manifest) == []
    # Plain names in the schema; the registry decides at load.
    unknown = {**manifest, "protocol": {**manifest["protocol"], "benchmark": "libero_max"}}
    assert schema_errors(MANIFEST_SCHEMA, unknown) == []
    assert "no benchmark family 'libero_max'" in run_family_errors(unknown)[0]
    wrong = {**manifest, "protocol": {**manifest["protocol"], "adapter": "mujoco"}}
    assert "the libero family's adapter is 'libero'" in run_family_errors(wrong)[0]


def test_a_v3_run_is_compared_in_its_own_version(tmp_path: Path) -> None:
    """A run launched before v4 resumes: its manifest names no benchmark (its plan does)."""
    proposed = external_manifest(tmp_path, RunSettings())
    older = as_recorded_by(proposed, MANIFEST_SCHEMA_V3)
    assert older["schema"] == MANIFEST_SCHEMA_V3 and "benchmark" not in older["protocol"]
    assert schema_errors(MANIFEST_SCHEMA_V3, older) == []
    assert manifest_errors(older) == [] and run_family_errors(older) == []
    check_compatible(older, proposed)
    with pytest.raises(ManifestConflictError):
        check_compatible({**older, "protocol": {**older["protocol"], "cases": 9}}, proposed)


def test_manifest_v5_records_that_nothing_is_enforced_for_external_actors(
    tmp_path: Path,
) -> None:
    manifest = external_manifest(tmp_path, RunSettings())
    assert manifest["schema"] == MANIFEST_SCHEMA == "mailroom.run_manifest/v5"
    assert manifest["enforcement"] == {
        "memory": "not enforced",
        "memory_reason": EXTERNAL_ACTORS,
        "writable_space": "sampled",
        "writable_space_reason": EXTERNAL_ACTORS,
    }
    assert schema_errors(MANIFEST_SCHEMA, manifest) == []
    assert (
        RunEnforcement.model_validate(manifest["enforcement"]).document()
        == (manifest["enforcement"])
    )


ENFORCED = {
    "memory": "enforced",
    "memory_reason": None,
    "writable_space": "kernel",
    "writable_space_reason": None,
}
ENFORCEMENT_CASES: dict[str, tuple[object, bool]] = {
    "enforced": (ENFORCED, True),
    "memory_not_enforced": (
        {**ENFORCED, "memory": "not enforced", "memory_reason": "no hierarchy"},
        True,
    ),
    "sampled": (
        {**ENFORCED, "writable_space": "sampled", "writable_space_reason": "not root"},
        True,
    ),
    "memory_without_reason": ({**ENFORCED, "memory": "not enforced"}, False),
    "enforced_with_reason": ({**ENFORCED, "memory_reason": "verified"}, False),
    "sampled_without_reason": ({**ENFORCED, "writable_space": "sampled"}, False),
    "kernel_with_reason": ({**ENFORCED, "writable_space_reason": "root"}, False),
    "empty_reason": (
        {**ENFORCED, "memory": "not enforced", "memory_reason": ""},
        False,
    ),
    "memory_other": ({**ENFORCED, "memory": "enforced by cgroup"}, False),
    "memory_bool": ({**ENFORCED, "memory": True}, False),
    "writable_space_other": ({**ENFORCED, "writable_space": "enforced"}, False),
    "no_memory_reason": ({k: v for k, v in ENFORCED.items() if k != "memory_reason"}, False),
    "no_writable_space": ({k: v for k, v in ENFORCED.items() if k != "writable_space"}, False),
    "extra": ({**ENFORCED, "by": "cgroup v1"}, False),
    "not_an_object": ("enforced", False),
}


@pytest.mark.parametrize("name", sorted(ENFORCEMENT_CASES))
def test_the_manifest_enforcement_schema_and_model_agree(tmp_path: Path, name: str) -> None:
    enforcement, valid = ENFORCEMENT_CASES[name]
    manifest = {**external_manifest(tmp_path, RunSettings()), "enforcement": enforcement}
    assert (schema_errors(MANIFEST_SCHEMA, manifest) == []) is valid
    try:
        RunEnforcement.model_validate(enforcement)
        model_ok = True
    except ValidationError:
        model_ok = False
    assert model_ok is valid


def test_a_v4_run_is_compared_in_its_own_version(tmp_path: Path) -> None:
    """A run launched before v5 resumes: its manifest recorded no enforcement (each new
    result records its own) and stays as it is."""
    proposed = external_manifest(tmp_path, RunSettings())
    older = as_recorded_by(proposed, MANIFEST_SCHEMA_V4)
    assert older["schema"] == MANIFEST_SCHEMA_V4 and "enforcement" not in older
    assert older["protocol"]["benchmark"] == "libero"
    assert schema_errors(MANIFEST_SCHEMA_V4, older) == [] and manifest_errors(older) == []
    assert schema_errors(MANIFEST_SCHEMA_V4, proposed) != []  # v4 has no enforcement
    check_compatible(older, proposed)
    with pytest.raises(ManifestConflictError):
        check_compatible({**older, "protocol": {**older["protocol"], "cases": 9}}, proposed)


def test_a_v5_run_refuses_a_resume_that_enforces_otherwise(tmp_path: Path) -> None:
    """What the kernel enforces is part of the run's identity: a resume where it is not
    what the run recorded would mix results held to other limits."""
    manifest = external_manifest(tmp_path, RunSettings())
    check_compatible(manifest, manifest)
    other = {**manifest, "enforcement": ENFORCED}
    with pytest.raises(ManifestConflictError, match=r"enforcement\.memory"):
        check_compatible(other, manifest)
