"""Which actor instructions a run handed its actors, recorded in its manifest and in every
result: a campaign through its own path (manifest, schedule, a worker, real endpoints, the
diagnostic actor in its real sandbox) with the simulator-free `FakeSimulator`.

A profile's `"instructions"` names the version; a profile without one hands v1, as every
run did before versions existed. A run launched before manifest v3 resumes unrefused and
keeps its own manifest; an attempt it lost is recorded with the version its manifest says.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from campaign_builders import DIAGNOSTIC_ACTOR, campaign_request, profile_declaration
from conftest import sandbox_processes_left
from mailroom.hashing import sha256_bytes
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.actors.instructions import render_instructions
from mailroom.orchestrator.actors.profiles import actor_instructions_template
from mailroom.orchestrator.campaign.interrupted import record_interrupted
from mailroom.orchestrator.campaign.launch import CampaignRequest, run_campaign
from mailroom.orchestrator.campaign.manifest import ManifestConflictError, check_compatible
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.families.plans import build_plan
from mailroom.orchestrator.records.manifest import instructions_of_run
from mailroom.orchestrator.records.run_directory import RunDirectory
from mailroom.orchestrator.records.upgrade import upgrade_manifest
from mailroom.orchestrator.sim.fake import FakeSimulator
from older_records import manifest_as
from recorded_runs import make_run

PLAN = build_plan("task_coverage", suite="libero_10", task_ids=[0, 1])
# The diagnostic actor, after keeping what it read on its stdin (its instructions) in its
# own scratch folder, its working directory.
KEEP_STDIN = (
    "import runpy, sys; "
    "open('handed.txt', 'w', encoding='utf-8').write(sys.stdin.read()); "
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def _declaration(instructions: str | None) -> dict[str, Any]:
    declared = profile_declaration()
    # The profile as shipped declares v2; a declaration without it is read as v1.
    assert declared.pop("instructions") == "prompts/actor_instructions_v2.txt"
    if instructions is not None:
        declared["instructions"] = instructions
    return declared


def _request(run_dir: Path, mailbox_root: Path, declaration: dict[str, Any]) -> CampaignRequest:
    return campaign_request(
        run_dir,
        mailbox_root,
        plan=PLAN,
        declaration=declaration,
        actor=["{python}", "-c", KEEP_STDIN, DIAGNOSTIC_ACTOR, "{endpoint}"],
        settings=RunSettings(max_policy_calls=3, replan_interval=5, response_timeout_s=60.0),
        simulator=FakeSimulator,
    )


def _campaign(request: CampaignRequest) -> int:
    scheduled: list[int] = []
    outcome = run_campaign(request, lambda *_: None, scheduled.append)
    assert outcome.lost == [] and outcome.unrecorded == []
    assert sandbox_processes_left(request.run_dir) == []
    return scheduled[0]


def _attempt(run_dir: Path, attempt_id: str, name: str) -> Any:
    return json.loads((run_dir / "episodes" / attempt_id / name).read_text("utf-8"))


@pytest.mark.parametrize(
    ("declared", "version"),
    [("v2", "v2"), ("prompts/actor_instructions_v2.txt", "v2"), (None, "v1")],
    ids=["declares-v2", "names-v2-file", "declares-none"],
)
def test_the_declared_version_is_handed_and_recorded(
    tmp_path: Path, mailbox_root: Path, declared: str | None, version: str
) -> None:
    template = actor_instructions_template(version)
    assert template != actor_instructions_template("v2" if version == "v1" else "v1")
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    assert _campaign(_request(run_dir, mailbox_root, _declaration(declared))) == 2

    manifest = RunDirectory(run_dir).read_manifest()
    assert manifest["schema"] == "mailroom.run_manifest/v8"
    assert schema_errors("mailroom.run_manifest/v8", manifest) == []
    assert manifest["blinding"]["instructions_version"] == version
    assert manifest["blinding"]["instructions_sha256"] == sha256_bytes(template.encode())
    assert instructions_of_run(manifest) == version
    for case in PLAN.to_cases():
        attempt_id = case.attempt_id(1)
        result = _attempt(run_dir, attempt_id, "result.json")
        assert result["schema"] == "mailroom.episode_result/v8"
        assert schema_errors("mailroom.episode_result/v8", result) == []
        assert result["instructions_version"] == version
        assert result["outcome"] == "failure"  # the diagnostic actor ran, then stopped
        # Exactly the version's text, with only the endpoint and the host substituted,
        # kept privately and read by the actor on its stdin.
        endpoint = Path(_attempt(run_dir, attempt_id, "endpoint.json")["endpoint"])
        rendered = render_instructions(str(endpoint), template=template)
        launch = _attempt(run_dir, attempt_id, "launch_message.json")
        assert launch == {"instructions": rendered, "instructions_version": version}
        assert (endpoint / "scratch" / "handed.txt").read_text("utf-8") == rendered


def _as_v2(manifest: dict[str, Any]) -> dict[str, Any]:
    """A manifest as a run launched before v3 wrote it."""
    return manifest_as(manifest, 2)


def _handed(manifest: dict[str, Any]) -> str:
    """The instructions version a manifest of any version says its actors were handed."""
    return instructions_of_run(upgrade_manifest(manifest).document())


def test_a_run_launched_before_manifest_v3_resumes_and_keeps_its_own_manifest(
    tmp_path: Path, mailbox_root: Path
) -> None:
    """Before versions existed every actor was handed v1, whatever its profile said; the
    shipped profiles named v1's file."""
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    before = _declaration("prompts/actor_instructions.txt")
    request = _request(run_dir, mailbox_root, before)
    assert _campaign(request) == 2
    run = RunDirectory(run_dir)
    older = _as_v2(run.read_manifest())
    run.manifest_path.write_text(json.dumps(older))
    # One case never attempted (its attempt's folder gone), one attempt lost mid-way.
    first, second = (case.attempt_id(1) for case in PLAN.to_cases())
    shutil.rmtree(run_dir / "episodes" / first)
    (run_dir / "episodes" / second / "result.json").unlink()

    assert _handed(older) == "v1"
    declared = {**older["profile"]["declaration"], "instructions": "v2"}
    assert _handed({**older, "profile": {**older["profile"], "declaration": declared}}) == (
        "v1"  # a pre-v3 run handed v1 whatever its declaration names
    )
    resumed = _request(run_dir, mailbox_root, before)
    assert _campaign(resumed) == 1  # the lost attempt is recorded, never re-run
    kept = json.loads(run.manifest_path.read_text())
    assert kept == older  # the run keeps the manifest it was launched with
    rerun = _attempt(run_dir, first, "result.json")
    assert rerun["schema"] == "mailroom.episode_result/v8"
    assert rerun["instructions_version"] == "v1"
    lost = _attempt(run_dir, second, "result.json")
    assert (lost["outcome"], lost["errors"][0]["code"]) == ("error", "interrupted")
    assert lost["instructions_version"] == "v1"
    assert schema_errors("mailroom.episode_result/v8", lost) == []

    # Another version is another run: refused, whichever manifest version the run has.
    other = _request(run_dir, mailbox_root, _declaration("v2"))
    with pytest.raises(ManifestConflictError, match=r"profile\.declaration"):
        run_campaign(other, lambda *_: None, lambda _: None)
    assert json.loads(run.manifest_path.read_text()) == older


def test_a_manifest_v3_run_refuses_another_instructions_version_by_name(
    tmp_path: Path,
) -> None:
    run, _ = make_run(tmp_path, proprio=False)
    manifest = run.read_manifest()
    assert manifest["blinding"]["instructions_version"] == "v1"
    check_compatible(manifest, manifest)
    check_compatible(_as_v2(manifest), manifest)  # compared as the v2 run recorded it
    changed = {**manifest, "blinding": {**manifest["blinding"], "instructions_version": "v2"}}
    with pytest.raises(ManifestConflictError, match=r"blinding\.instructions_version"):
        check_compatible(manifest, changed)
    # A v1 run recorded no confinement: its resume is still refused, as before.
    v1 = _as_v2(manifest)
    del v1["confinement"]
    v1["schema"] = "mailroom.run_manifest/v1"
    with pytest.raises(ManifestConflictError, match="confinement"):
        check_compatible(v1, manifest)


@pytest.mark.parametrize("schema", ["mailroom.run_manifest/v1", "mailroom.run_manifest/v2"])
def test_an_older_run_without_a_declared_version_records_its_lost_attempts_as_v1(
    tmp_path: Path, schema: str
) -> None:
    run, cases = make_run(tmp_path, proprio=False)
    older = _as_v2(run.read_manifest())
    if schema == "mailroom.run_manifest/v1":
        del older["confinement"]
        older["schema"] = schema
        assert schema_errors(schema, older) == []
    run.manifest_path.write_text(json.dumps(older))
    assert _handed(older) == "v1"
    result = record_interrupted(run, cases[0].attempt_id(1), reason="the orchestrator stopped")
    assert result.instructions_version == "v1"
    document = _attempt(run.root, cases[0].attempt_id(1), "result.json")
    assert document["schema"] == "mailroom.episode_result/v8"
    assert document["instructions_version"] == "v1"
