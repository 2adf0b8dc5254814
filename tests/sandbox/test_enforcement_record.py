"""Whether the kernel enforced the actors' limits, recorded in the manifest (v5) and in
every result (v6), and counted by `mailroom report`.

Real launches of the toy family (`tests/support/toy_family`: a fake simulator, no LIBERO) run
the diagnostic actor in its real sandbox, then with `--confinement none`: the manifest
says what the launching process could enforce, each result what its own actor had (as
its `actor_started` event says), and `report` counts them. On this machine, as root, the
memory ceiling is enforced by a memory cgroup and a sandboxed actor's writable space is
a tmpfs bounded by the kernel; an unsandboxed actor's scratch quota is sampled. A run
launched before manifest v5 resumes and keeps its own manifest; a result written before
v6 still loads, is written back as it was, and reports as unknown.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import toy_family_runs
from conftest import run_cli, sandbox_processes_left
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.campaign.interrupted import record_interrupted
from mailroom.orchestrator.campaign.manifest import NOT_SANDBOXED
from mailroom.orchestrator.records.result import RESULT_SCHEMA, Enforcement, EpisodeResult
from mailroom.orchestrator.records.run_directory import RunDirectory, read_result
from older_records import manifest_as, result_as_v5
from recorded_events import episode_events
from recorded_runs import make_run, write_result
from toy_family_runs import launch_toy, plan_toy

ENFORCED = {"memory": "enforced", "writable_space": "kernel"}
UNSANDBOXED = {"memory": "enforced", "writable_space": "sampled"}
NOTHING = {"memory": "not enforced", "writable_space": "sampled"}

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="the kernel's limits need root here (a memory cgroup, a tmpfs)"
)


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _results(run_dir: Path) -> list[dict[str, Any]]:
    return [_json(p) for p in sorted((run_dir / "episodes").glob("*/result.json"))]


def _actor_started(run_dir: Path, attempt_id: str) -> dict[str, Any]:
    return episode_events(run_dir, attempt_id, "actor_started")[0]


# What an actor's description says, and what the result makes of it ------------------


@pytest.mark.parametrize(
    ("started", "expected"),
    [
        (
            {"memory": {"enforced": True}, "filesystem": {"enforced": "kernel"}},
            ENFORCED,
        ),
        (
            {"memory": {"enforced": False}, "filesystem": {"enforced": "sampled"}},
            NOTHING,
        ),
        (
            {"memory": {"enforced": True}, "filesystem": {"enforced": "sampled"}},
            UNSANDBOXED,
        ),
        # An actor recorded before its writable space was: sampled.
        ({"memory": {"enforced": True}}, UNSANDBOXED),
        # Recorded before its memory ceiling was, or not as a record says it: not enforced.
        ({"pid": 7}, NOTHING),
        ({"memory": {"enforced": "yes"}, "filesystem": "kernel"}, NOTHING),
        # Not started by the orchestrator (an external actor, or never started).
        (None, NOTHING),
    ],
    ids=["kernel", "nothing", "unsandboxed", "no-filesystem", "no-memory", "malformed", "none"],
)
def test_enforcement_of_an_actor_as_its_description_says(
    started: dict[str, Any] | None, expected: dict[str, str]
) -> None:
    assert Enforcement.of_actor(started).model_dump() == expected


# Real launches -----------------------------------------------------------------------

# A fixture of tests/support, used by name.
toy_env = toy_family_runs.toy_env


@pytest.fixture(scope="module")
def toy_plan(toy_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return plan_toy(tmp_path_factory.mktemp("toy-plan") / "plan.json", "toyworld_shelf", toy_env)


def _launch(
    toy_env: dict[str, str], plan: Path, run_dir: Path, mailbox_root: Path, *options: str
) -> subprocess.CompletedProcess[str]:
    launched = launch_toy(plan, run_dir, mailbox_root, toy_env, "--max-policy-calls", "4", *options)
    if "none" not in options:
        assert sandbox_processes_left(run_dir) == []
    return launched


def _report(toy_env: dict[str, str], run_dir: Path) -> tuple[dict[str, Any], str]:
    as_json = run_cli("report", str(run_dir), "--json", env=toy_env)
    assert as_json.returncode == 0, as_json.stderr
    as_text = run_cli("report", str(run_dir), env=toy_env)
    assert as_text.returncode == 0, as_text.stderr
    return json.loads(as_json.stdout), as_text.stdout + as_text.stderr


@needs_root
def test_a_sandboxed_launch_records_the_kernels_limits_in_its_manifest_and_results(
    toy_env: dict[str, str], toy_plan: Path, tmp_path: Path, mailbox_root: Path
) -> None:
    run_dir = tmp_path / "run"
    _launch(toy_env, toy_plan, run_dir, mailbox_root / "sandboxed")
    manifest = _json(run_dir / "manifest.json")
    assert manifest["schema"] == "mailroom.run_manifest/v8"
    assert schema_errors("mailroom.run_manifest/v8", manifest) == []
    assert manifest["confinement"]["mode"] == "sandbox"
    assert manifest["enforcement"] == {
        "memory": "enforced",
        "memory_reason": None,
        "writable_space": "kernel",
        "writable_space_reason": None,
    }
    results = _results(run_dir)
    assert len(results) == 2
    for result in results:
        assert result["schema"] == "mailroom.episode_result/v8"
        assert schema_errors("mailroom.episode_result/v8", result) == []
        assert result["enforcement"] == ENFORCED
        # As the actor's own record says: a cgroup with its ceiling, a tmpfs of its own.
        started = _actor_started(run_dir, result["attempt_id"])
        assert started["memory"]["enforced"] is True
        assert started["filesystem"]["enforced"] == "kernel"
    document, text = _report(toy_env, run_dir)
    assert document["limits"] == {"memory": {"enforced": 2}, "writable_space": {"kernel": 2}}
    assert (
        "limits: memory enforced in 2 of 2 results; writable space bounded by the kernel in "
        "2 of 2\n"
    ) in text


@needs_root
def test_an_unconfined_launch_records_its_writable_space_as_sampled(
    toy_env: dict[str, str], toy_plan: Path, tmp_path: Path, mailbox_root: Path
) -> None:
    run_dir = tmp_path / "run"
    _launch(toy_env, toy_plan, run_dir, mailbox_root / "unconfined", "--confinement", "none")
    manifest = _json(run_dir / "manifest.json")
    assert schema_errors("mailroom.run_manifest/v8", manifest) == []
    assert manifest["confinement"]["mode"] == "none"
    assert manifest["enforcement"] == {
        "memory": "enforced",
        "memory_reason": None,
        "writable_space": "sampled",
        "writable_space_reason": NOT_SANDBOXED,
    }
    results = _results(run_dir)
    assert [r["enforcement"] for r in results] == [UNSANDBOXED, UNSANDBOXED]
    for result in results:
        assert schema_errors("mailroom.episode_result/v8", result) == []
        assert _actor_started(run_dir, result["attempt_id"])["filesystem"]["enforced"] == (
            "sampled"
        )
    document, text = _report(toy_env, run_dir)
    assert document["limits"] == {"memory": {"enforced": 2}, "writable_space": {"sampled": 2}}
    assert (
        "limits: memory enforced in 2 of 2 results; writable space bounded by the kernel in "
        "0 of 2\n"
    ) in text


@needs_root
def test_a_run_launched_before_manifest_v5_resumes_and_keeps_its_own_manifest(
    toy_env: dict[str, str], toy_plan: Path, tmp_path: Path, mailbox_root: Path
) -> None:
    """Its manifest recorded no enforcement: compared in its own version, it resumes, and
    the attempt it runs now records what its actor had; its older results stay as they
    were written and report as unknown."""
    run_dir = tmp_path / "run"
    _launch(toy_env, toy_plan, run_dir, mailbox_root / "before")
    run = RunDirectory(run_dir)
    older = manifest_as(run.read_manifest(), 4)
    run.manifest_path.write_text(json.dumps(older), encoding="utf-8")
    first, second = sorted((run_dir / "episodes").iterdir())
    shutil.rmtree(first)  # never attempted
    result_as_v5(second / "result.json")  # written before results said
    kept = (second / "result.json").read_bytes()

    resumed = run_cli(
        "resume", str(run_dir), "--mailbox-root", str(mailbox_root / "after"), env=toy_env
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads(run.manifest_path.read_text()) == older  # the file is kept as it was
    rerun = _json(first / "result.json")
    assert rerun["schema"] == "mailroom.episode_result/v8"
    assert rerun["enforcement"] == ENFORCED
    assert (second / "result.json").read_bytes() == kept
    document, _ = _report(toy_env, run_dir)
    assert document["limits"] == {
        "memory": {"enforced": 1, "unknown": 1},
        "writable_space": {"kernel": 1, "unknown": 1},
    }


# Results rebuilt from events, and results written before v6 ---------------------------


def _events(run: RunDirectory, attempt_id: str, *lines: dict[str, Any]) -> None:
    directory = run.episode_dir(attempt_id)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "events.jsonl").write_text(
        "".join(json.dumps({"t": 1788775200.0 + i, **e}) + "\n" for i, e in enumerate(lines)),
        encoding="utf-8",
    )


def test_an_interrupted_attempt_records_what_its_actor_started_event_says(
    tmp_path: Path,
) -> None:
    run, cases = make_run(tmp_path, proprio=False)
    started = {
        "event": "actor_started",
        "memory": {"ceiling_mb": 2048, "enforced": True, "by": "cgroup v1"},
        "filesystem": {"enforced": "kernel", "size_mb": 1024, "inodes": 100000},
    }
    shown = {"event": "observation_published", "sequence": 1}
    _events(run, cases[0].attempt_id(1), started, {"event": "episode_started"}, shown)
    # One whose episode ended before its actor started: nothing was enforced.
    _events(run, cases[1].attempt_id(1), {"event": "episode_started"}, shown)
    held = record_interrupted(run, cases[0].attempt_id(1), reason="the orchestrator stopped")
    bare = record_interrupted(run, cases[1].attempt_id(1), reason="the orchestrator stopped")
    assert held.enforcement is not None and held.enforcement.model_dump() == ENFORCED
    assert bare.enforcement is not None and bare.enforcement.model_dump() == NOTHING
    for case in cases[:2]:
        document = _json(run.episode_dir(case.attempt_id(1)) / "result.json")
        assert schema_errors("mailroom.episode_result/v8", document) == []


def test_a_v5_result_reads_as_the_current_version_with_its_limits_unknown(
    tmp_path: Path,
) -> None:
    run, cases = make_run(tmp_path, proprio=False)
    write_result(run, cases[0], 1, outcome="success", executed=5, proprio=False)
    path = run.episode_dir(cases[0].attempt_id(1)) / "result.json"
    result_as_v5(path)
    written = path.read_bytes()
    read = read_result(path)
    assert isinstance(read, EpisodeResult)
    assert read.schema_ == RESULT_SCHEMA and read.enforcement is None
    assert read.document()["enforcement"] is None
    assert read.usage.source == "unavailable_before_gateway"  # nothing could meter it then
    upgraded = ("schema", "enforcement", "usage")
    assert {k: v for k, v in read.document().items() if k not in upgraded} == {
        k: v for k, v in json.loads(written).items() if k not in upgraded
    }
    assert path.read_bytes() == written  # reading never rewrites the file
