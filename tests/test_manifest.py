"""The run manifest records every declared setting, the outbox durability included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.actors.confinement import ConfinementSettings
from mailroom.orchestrator.campaign.manifest import (
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
    manifest_errors,
)


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
    assert manifest["schema"] == MANIFEST_SCHEMA == "mailroom.run_manifest/v4"
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
