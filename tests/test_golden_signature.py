"""A golden signature of what a run records.

A fixed plan runs through the production path (the campaign's launch, its manifest and
schedule, the coordinator's worker process, a real endpoint watched by the real loop,
the diagnostic actor in its real sandbox with its profile's limits) with the
simulator-free `FakeSimulator`, whose frames and successes are deterministic. Each
recorded field (result keys, every event kind's fields, every steps column), with the
volatile ones removed (times, random tokens and paths, pids, uids, the sandbox tool's
build), is reduced to a short hash over all attempts in plan order and compared with the
pinned table below: a change in what a run records fails as one line naming the field.

When a change is intended, the failure prints the new table for `golden_signature.json`.

What changed the pinned table, newest first:

- every shipped profile, the diagnostic one included, hands its actors the v2 actor
  instructions (the arm's measured rotation, gripper and coasting facts):
  `result.instructions_version` is `v2`.
- results carry `instructions_version` (`mailroom.episode_result/v4`: the version of the
  actor instructions handed, v2 instructions being the first to follow v1; `v1` here, as
  the diagnostic profile declares none): `result.schema` changed, `result.instructions_version`
  is new. The same regeneration pinned `actor_started.limits.output_mb`,
  `actor_started.limits.exit_window_s` and `actor_stopped.exited_by_itself`, which runs
  have recorded since the actor's output cap and exit window became profile limits.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import sandbox_processes_left
from mailroom.hashing import hash_document
from mailroom.orchestrator.actors.confinement import ConfinementSettings
from mailroom.orchestrator.actors.launcher import profile_launcher
from mailroom.orchestrator.actors.profiles import profile_dir
from mailroom.orchestrator.campaign.launch import CampaignRequest, run_campaign
from mailroom.orchestrator.catalog.plans import render_plan
from mailroom.orchestrator.episode.settings import ActorLimits, RunSettings
from mailroom.orchestrator.families.plans import build_plan
from mailroom.orchestrator.sim.fake import FakeSimulator

# Removed wherever they appear: they differ between two runs of the same plan.
VOLATILE_KEYS = frozenset(
    {
        "t",  # event times
        "started_at",
        "finished_at",
        "wall_time_s",
        "request_id",  # random per observation
        "pid",
        "argv",  # names the random endpoint
        "cwd",
        "HOME",
        "outer_uid",  # a fresh random uid per episode
        "tool",  # the sandbox tool's path and version on this machine
        "allocated_bytes",  # depends on the filesystem
    }
)
# Latency, queueing and processing figures are times; their sample counts are not.
VOLATILE_PATHS = frozenset(
    f"{block}.{figure}"
    for block in ("latency", "queue_delay", "processing")
    for figure in ("max_ms", "median_ms", "total_ms")
)
# The response's hash covers its request_id, so it is volatile too.
VOLATILE_EVENT_FIELDS = frozenset(
    {
        "response_claimed.sha256",
        "decision_served.latency_ms",
        "decision_served.queue_delay_ms",
        "decision_served.processing_ms",
    }
)

# The pinned table: field -> short hash (a JSON file beside this test).
PINNED_FILE = Path(__file__).with_name("golden_signature.json")
PINNED: dict[str, str] = json.loads(PINNED_FILE.read_text(encoding="utf-8"))


def _flatten(document: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    if isinstance(document, dict):
        for key in sorted(document):
            if key in VOLATILE_KEYS:
                continue
            path = f"{prefix}.{key}" if prefix else key
            yield from _flatten(document[key], path)
    else:
        yield prefix, document


def _fields_of_attempt(episode: Path) -> dict[str, list[Any]]:
    fields: dict[str, list[Any]] = {}

    def add(name: str, value: Any) -> None:
        fields.setdefault(name, []).append(value)

    result = json.loads((episode / "result.json").read_text(encoding="utf-8"))
    for path, value in _flatten(result, ""):
        if path not in VOLATILE_PATHS:
            add(f"result.{path}", value)
    for line in (episode / "events.jsonl").read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        kind = event.pop("event")
        add("events.order", kind)
        for path, value in _flatten(event, kind):
            if path not in VOLATILE_EVENT_FIELDS:
                add(f"events.{path}", value)
    for line in (episode / "steps.jsonl").read_text(encoding="utf-8").splitlines():
        for path, value in _flatten(json.loads(line), ""):
            add(f"steps.{path}", value)
    return fields


def signature(run_dir: Path, attempt_ids: list[str]) -> dict[str, str]:
    """Per recorded field, a short hash of its values over every attempt in plan order."""
    merged: dict[str, list[Any]] = {}
    for n, attempt_id in enumerate(attempt_ids):
        for name, values in _fields_of_attempt(run_dir / "episodes" / attempt_id).items():
            merged.setdefault(name, []).append([n, values])
    return {name: hash_document(values)[:16] for name, values in sorted(merged.items())}


def _run(run_dir: Path, mailbox_root: Path, succeed_at: int | None) -> list[str]:
    """A launch of the plan through the campaign's own path (manifest, schedule, workers)."""
    plan = build_plan("task_coverage", suite="libero_10", task_ids=[0, 1])
    profile = "scripted_diagnostic"
    declaration = json.loads((profile_dir(profile) / "profile.json").read_text("utf-8"))
    actor = ["{python}", str(profile_dir(profile) / "actor.py"), "{endpoint}"]
    confinement = ConfinementSettings(mode="sandbox")
    limits = ActorLimits.model_validate(declaration["limits"])
    run_dir.mkdir(mode=0o700)
    request = CampaignRequest(
        run_dir=run_dir,
        plan=plan,
        plan_bytes=render_plan(plan),
        profile=profile,
        declaration=declaration,
        settings=RunSettings(max_policy_calls=5, replan_interval=5, response_timeout_s=60.0),
        actor_command=actor,
        launcher=profile_launcher(
            actor,
            profile=profile,
            confinement=confinement,
            limits=limits,
            run_dir=run_dir,
            mailbox_root=mailbox_root,
        ),
        limits=limits,
        mailbox_root=mailbox_root,
        workers=1,
        record="minimal",
        confinement=confinement,
        simulator=functools.partial(FakeSimulator, succeed_at=succeed_at),
    )
    scheduled: list[int] = []
    outcome = run_campaign(request, lambda *_: None, scheduled.append)
    assert scheduled == [2] and outcome.lost == [] and outcome.unrecorded == []
    assert sandbox_processes_left(run_dir) == []
    return [case.attempt_id(1) for case in plan.to_cases()]


@dataclass(frozen=True)
class Recorded:
    table: dict[str, str]
    success_run: Path
    success_ids: list[str]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, module_mailbox_root: Path) -> Recorded:
    """Two runs of the plan: native success at control 7, and never (the actor stops)."""
    table: dict[str, str] = {}
    runs: dict[str, tuple[Path, list[str]]] = {}
    for label, succeed_at in (("success", 7), ("stop", None)):
        run_dir = tmp_path_factory.mktemp("golden") / label
        runs[label] = (run_dir, _run(run_dir, module_mailbox_root, succeed_at))
        table.update({f"{label}:{k}": v for k, v in signature(*runs[label]).items()})
    return Recorded(table, *runs["success"])


def test_the_recorded_content_matches_the_pinned_signature(recorded: Recorded) -> None:
    table = recorded.table
    changed = sorted(k for k in PINNED.keys() & table.keys() if PINNED[k] != table[k])
    added = sorted(table.keys() - PINNED.keys())
    removed = sorted(PINNED.keys() - table.keys())
    new_table = json.dumps(table, indent=1, sort_keys=True)
    assert (changed, added, removed) == ([], [], []), (
        f"changed fields: {changed}\nnew fields: {added}\nfields gone: {removed}\n"
        f"new {PINNED_FILE.name}, if the change is intended:\n{new_table}"
    )


def test_the_signature_sees_a_one_value_change(recorded: Recorded, tmp_path: Path) -> None:
    """The check can fail: one changed step value changes exactly that field's line."""
    source = recorded.success_run / "episodes" / recorded.success_ids[0]
    copy = tmp_path / "episodes" / source.name
    copy.mkdir(parents=True)
    for name in ("result.json", "events.jsonl"):
        (copy / name).write_bytes((source / name).read_bytes())
    steps = (source / "steps.jsonl").read_text(encoding="utf-8").splitlines()
    first = json.loads(steps[0])
    first["action"][0] = 0.5
    (copy / "steps.jsonl").write_text(
        "\n".join([json.dumps(first), *steps[1:]]) + "\n", encoding="utf-8"
    )
    before = signature(recorded.success_run, [source.name])
    after = signature(tmp_path, [source.name])
    assert [k for k in before if before[k] != after[k]] == ["steps.action"]


def test_volatile_fields_are_the_only_difference_between_two_runs(
    recorded: Recorded, tmp_path: Path, module_mailbox_root: Path
) -> None:
    """Removing exactly the volatile fields makes two runs of one plan agree."""
    ids = _run(tmp_path / "again", module_mailbox_root, 7)
    again = signature(tmp_path / "again", ids)
    first = {k.split(":", 1)[1]: v for k, v in recorded.table.items() if k.startswith("success:")}
    assert again == first
