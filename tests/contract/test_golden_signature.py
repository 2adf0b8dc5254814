"""A golden signature of everything an actor sees and everything a run writes.

A fixed plan runs through the production path (the campaign's launch, its manifest and
schedule, the coordinator's worker process, a real endpoint watched by the real loop,
the diagnostic actor in its real sandbox with its profile's limits) with the
simulator-free `FakeSimulator`, whose frames and successes are deterministic; once with
`--record full` (native success at control 7) and once with `--record minimal` (the
actor stops). Every file the run leaves is read, and a file no reader below knows fails
the test:

- what the actor sees: its launch message, every observation document and the sha256 of
  every PNG it was sent (the kept images of the full run, and the hashes the
  `observation_published` events record in both runs);
- what the run writes: the plan, the manifest, the run-level events, and per attempt the
  result, events, steps, the raw responses kept, the endpoint record, the actor's kept
  output and the videos.

Each recorded field is reduced to a short hash over all attempts in plan order and
compared with the pinned table in `golden_signature.json`: a change in what a run records
fails as one line naming the field. Fields that differ between two runs of the same plan
are named in `VOLATILE_FIELDS` (their value becomes `PLACEHOLDER`; that the field is
recorded stays pinned); run-specific paths and tokens inside any text (the endpoint, the
mailbox root, the run directory, the checkout) become the names in `_path_placeholders`.

When a change is intended, regenerate the table, review its diff
(`git diff tests/support/golden_signature.json`),

    MAILROOM_REGENERATE_GOLDEN=1 .venv/bin/pytest tests/contract/test_golden_signature.py

then add a line below naming what changed. Without the variable, a failure prints the
changed, new and missing field names.

What changed the pinned table, newest first:

- results may carry what the provider gateway metered and the manifest records the
  run's gateway (`mailroom.episode_result/v7` and `mailroom.run_manifest/v6`): here no
  gateway, so `result.usage` stays the null one; `result.schema` and `manifest.schema`
  changed, `manifest.provider_gateway` and `manifest.volatile.provider_upstream` (and
  the launch event's copy of `volatile`) are new, null.
- each actor has a memory ceiling the kernel enforces (`limits.memory_mb`, a memory
  cgroup per episode): `actor_started.limits.memory_mb` and `actor_started.memory`
  (the ceiling, whether it is enforced and by what, the latter volatile: this machine's
  cgroups) and `actor_stopped.memory` (OOM kills, whether the cgroup was removed, its
  peak, volatile) are new; the diagnostic profile declares `memory_mb` and says so in
  its `limits_note`, which changes the manifest's declaration and its hash.
- the signature reads everything a run writes and an actor sees: the plan, the manifest,
  the run-level events, observation documents, kept PNGs and videos, raw responses, the
  launch message, the endpoint record and the actor's output; volatile fields keep their
  name with a placeholder value instead of being dropped, and the paths an actor is handed
  (argv, cwd, HOME) are pinned with the endpoint as a placeholder. The success run is
  recorded in full (`success:` fields of kept images and videos are new).
- every shipped profile, the diagnostic one included, hands its actors the v2 actor
  instructions (the arm's measured rotation, gripper and coasting facts):
  `result.instructions_version` is `v2`.
- results carry `instructions_version` (`mailroom.episode_result/v4`: the version of the
  actor instructions handed, v2 instructions being the first to follow v1; `v1` here, as
  the diagnostic profile declares none): `result.schema` changed, `result.instructions_version`
  is new. The same regeneration pinned `actor_started.limits.output_mb`,
  `actor_started.limits.exit_window_s` and `actor_stopped.exited_by_itself`, which runs
  have recorded since the actor's output cap and exit window became profile limits.
- results say how their simulator was held (`mailroom.episode_result/v5`, `simulator`:
  `dedicated` here: one slot has nothing to park beside), and so does each episode's
  `episode_started` event; the launch event names the worker's `holding` (`parked`, the
  default): `result.schema` changed, `result.simulator`,
  `events.episode_started.simulator` and `run_events.launched.holding` are new.
- results and the manifest say whether the kernel enforced the actors' limits
  (`mailroom.episode_result/v6` and `mailroom.run_manifest/v5`, `enforcement`: here the
  memory ceiling enforced and the writable space bounded by the kernel, as this machine
  allows a root launch): `result.schema` and `manifest.schema` changed,
  `result.enforcement.*` and `manifest.enforcement.*` are new.
- a sandboxed actor's scratch/, /tmp and /dev/shm are one tmpfs of its own, bounded by
  the kernel and kept into the endpoint after the stop: `actor_started.filesystem.*`
  (the bound) and `actor_stopped.filesystem.*` (how full, what was kept) are new, and
  `actor_stopped.endpoint_usage.entries` counts the kept `tmp/` and `dev-shm/` folders.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest
from campaign_builders import campaign_request, diagnostic_actor
from conftest import sandbox_processes_left
from mailroom.hashing import hash_document, sha256_bytes
from mailroom.orchestrator.campaign.launch import run_campaign
from mailroom.orchestrator.episode.settings import RecordMode, RunSettings
from mailroom.orchestrator.families.plans import build_plan
from mailroom.orchestrator.sim.fake import FakeSimulator
from recorded_events import attempt_events

PLACEHOLDER = "<volatile>"

# Every field whose value differs between two runs of the same plan, as a pattern over
# the field's name (`<document>.<path>`, `*` matching across dots). Its value is replaced
# by PLACEHOLDER; the field itself stays in the signature.
VOLATILE_FIELDS: tuple[str, ...] = (
    # times
    "events.*.t",
    "run_events.*.t",
    "result.started_at",
    "result.finished_at",
    "*.volatile.created_at",
    # durations
    "result.wall_time_s",
    "result.latency.*_ms",
    "result.queue_delay.*_ms",
    "result.processing.*_ms",
    "events.decision_served.latency_ms",
    "events.decision_served.queue_delay_ms",
    "events.decision_served.processing_ms",
    # random per observation (an actor echoes it; a response's hash covers it)
    "*.request_id",
    "events.response_claimed.sha256",
    # random per episode: the sandbox's outer user, the actor's pid
    "events.actor_started.confinement.outer_uid",
    "events.actor_started.pid",
    # this machine and this checkout: host name, sandbox tool, installed versions, sources
    "*.volatile.host",
    "*.confinement.tool.*",
    "events.actor_started.memory.by",
    "manifest.environment.*",
    "manifest.project.source_sha256",
    # depends on the filesystem, and on what the kernel charged to the actor's cgroup
    "events.actor_stopped.endpoint_usage.allocated_bytes",
    "events.actor_stopped.memory.peak_bytes",
)

# Files of a run that hold nothing recorded.
UNREAD_FILES = frozenset({".lock"})

CHECKOUT = Path(__file__).resolve().parents[2]

# The pinned table: field -> short hash (a JSON file beside this test).
PINNED_FILE = CHECKOUT / "tests" / "support" / "golden_signature.json"
PINNED: dict[str, str] = json.loads(PINNED_FILE.read_text(encoding="utf-8"))
REGENERATE = os.environ.get("MAILROOM_REGENERATE_GOLDEN") == "1"


def _path_placeholders(run_dir: Path, endpoint: str | None) -> list[tuple[str, str]]:
    """Run-specific strings inside recorded text, longest first, and what replaces them."""
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    pairs = [
        (str(run_dir), "<run_dir>"),
        (manifest["volatile"]["run_dir"], "<run_dir>"),  # where it was written, if moved since
        (manifest["volatile"]["mailbox_root"], "<mailbox_root>"),
        (str(CHECKOUT), "<checkout>"),
    ]
    if endpoint is not None:
        pairs += [(endpoint, "<endpoint>"), (Path(endpoint).name, "<endpoint_token>")]
    return sorted(pairs, key=lambda pair: -len(pair[0]))


@dataclass
class Reader:
    """Gathers one run's fields, each with its values in plan order."""

    run_dir: Path
    fields: dict[str, list[Any]] = field(default_factory=dict)
    read: set[Path] = field(default_factory=set)
    volatile_used: set[str] = field(default_factory=set)
    places: list[tuple[str, str]] = field(default_factory=list)

    def text(self, path: Path) -> str:
        self.read.add(path)
        text = path.read_text(encoding="utf-8", errors="replace")
        for literal, name in self.places:
            text = text.replace(literal, name)
        return text

    def add(self, name: str, value: Any) -> None:
        for pattern in VOLATILE_FIELDS:
            if fnmatchcase(name, pattern):
                self.volatile_used.add(pattern)
                value = PLACEHOLDER
                break
        self.fields.setdefault(name, []).append(value)

    def document(self, prefix: str, document: Any) -> None:
        if isinstance(document, dict) and document:
            for key in sorted(document):
                self.document(f"{prefix}.{key}", document[key])
        else:
            self.add(prefix, document)

    def json_file(self, prefix: str, path: Path) -> None:
        self.document(prefix, json.loads(self.text(path)))

    def event_log(self, prefix: str, path: Path) -> None:
        for line in self.text(path).splitlines():
            event = json.loads(line)
            kind = event.pop("event")
            self.add(f"{prefix}.order", kind)
            self.document(f"{prefix}.{kind}", event)

    def binary(self, name: str, path: Path) -> None:
        self.read.add(path)
        self.add(name, sha256_bytes(path.read_bytes()))


def _numbered(folder: Path, pattern: str) -> list[tuple[int, str, Path]]:
    """Files named like `obs-<n>...` in sequence order: (n, the rest of the name, path)."""
    found = []
    for path in folder.glob("*"):
        match = re.fullmatch(pattern, path.name)
        if match:
            found.append((int(match["n"]), match["rest"], path))
    return sorted(found)


def _read_attempt(reader: Reader, episode: Path) -> None:
    endpoint = json.loads((episode / "endpoint.json").read_text(encoding="utf-8"))["endpoint"]
    reader.places = _path_placeholders(reader.run_dir, endpoint)
    reader.json_file("launch_message", episode / "launch_message.json")
    reader.json_file("endpoint", episode / "endpoint.json")
    reader.json_file("result", episode / "result.json")
    reader.event_log("events", episode / "events.jsonl")
    for line in reader.text(episode / "steps.jsonl").splitlines():
        reader.document("steps", json.loads(line))
    observations = episode / "observations"
    for _, _, path in _numbered(observations, r"obs-(?P<n>\d+)(?P<rest>)\.json"):
        reader.json_file("observations", path)
    for _, camera, path in _numbered(observations, r"obs-(?P<n>\d+)-(?P<rest>.+)\.png"):
        reader.binary(f"images.{camera}", path)
    for _, _, path in _numbered(episode / "responses", r"resp-(?P<n>\d+)(?P<rest>)\.json"):
        raw = reader.text(path)  # raw bytes an actor wrote: JSON if it is, else its text
        try:
            reader.document("responses", json.loads(raw))
        except json.JSONDecodeError:
            reader.add("responses.raw", raw)
    for stream in ("stdout", "stderr"):
        reader.add(f"actor_output.{stream}", reader.text(episode / f"actor-{stream}.log"))
    for path in sorted((episode / "videos").glob("*.mp4")):
        reader.binary(f"videos.{path.stem}", path)


@dataclass(frozen=True)
class Signature:
    table: dict[str, str]
    unread: list[str]
    volatile_used: set[str]


def signature(run_dir: Path, attempt_ids: list[str]) -> Signature:
    """Per recorded field, a short hash of its values: the run's own documents, then each
    attempt in plan order."""
    merged: dict[str, list[Any]] = {}
    used: set[str] = set()
    read: set[Path] = set()
    readers: list[tuple[str | int, Reader]] = []
    run_level = Reader(run_dir, places=_path_placeholders(run_dir, None))
    run_level.json_file("plan", run_dir / "plan.json")
    run_level.json_file("manifest", run_dir / "manifest.json")
    run_level.event_log("run_events", run_dir / "events.jsonl")
    readers.append(("run", run_level))
    for n, attempt_id in enumerate(attempt_ids):
        reader = Reader(run_dir)
        _read_attempt(reader, run_dir / "episodes" / attempt_id)
        readers.append((n, reader))
    for label, reader in readers:
        for name, values in reader.fields.items():
            merged.setdefault(name, []).append([label, values])
        used |= reader.volatile_used
        read |= reader.read
    written = {p for p in run_dir.rglob("*") if p.is_file()}
    unread = sorted(
        str(p.relative_to(run_dir)) for p in written - read if p.name not in UNREAD_FILES
    )
    table = {name: hash_document(values)[:16] for name, values in sorted(merged.items())}
    return Signature(table, unread, used)


def _run(
    run_dir: Path, mailbox_root: Path, succeed_at: int | None, record: RecordMode
) -> list[str]:
    """A launch of the plan through the campaign's own path (manifest, schedule, workers)."""
    plan = build_plan("task_coverage", suite="libero_10", task_ids=[0, 1])
    run_dir.mkdir(mode=0o700)
    request = campaign_request(
        run_dir,
        mailbox_root,
        plan=plan,
        actor=diagnostic_actor(),
        settings=RunSettings(max_policy_calls=5, replan_interval=5, response_timeout_s=60.0),
        record=record,
        simulator=functools.partial(FakeSimulator, succeed_at=succeed_at),
    )
    scheduled: list[int] = []
    outcome = run_campaign(request, lambda *_: None, scheduled.append)
    assert scheduled == [2] and outcome.lost == [] and outcome.unrecorded == []
    assert sandbox_processes_left(run_dir) == []
    return [case.attempt_id(1) for case in plan.to_cases()]


@dataclass(frozen=True)
class Recorded:
    signatures: dict[str, Signature]
    success_run: Path
    success_ids: list[str]

    @property
    def table(self) -> dict[str, str]:
        return {
            f"{label}:{name}": value
            for label, sig in self.signatures.items()
            for name, value in sig.table.items()
        }


RUNS: tuple[tuple[str, int | None, RecordMode], ...] = (
    ("success", 7, "full"),
    ("stop", None, "minimal"),
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, module_mailbox_root: Path) -> Recorded:
    """Two runs of the plan: native success at control 7 recorded in full, and never (the
    actor stops) recorded minimal."""
    signatures: dict[str, Signature] = {}
    runs: dict[str, tuple[Path, list[str]]] = {}
    for label, succeed_at, record in RUNS:
        run_dir = tmp_path_factory.mktemp("golden") / label
        runs[label] = (run_dir, _run(run_dir, module_mailbox_root, succeed_at, record))
        signatures[label] = signature(*runs[label])
    return Recorded(signatures, *runs["success"])


def test_the_recorded_content_matches_the_pinned_signature(recorded: Recorded) -> None:
    table = recorded.table
    new_table = json.dumps(table, indent=1, sort_keys=True) + "\n"
    if REGENERATE:
        PINNED_FILE.write_text(new_table, encoding="utf-8")
        pinned = table
    else:
        pinned = PINNED
    changed = sorted(k for k in pinned.keys() & table.keys() if pinned[k] != table[k])
    added = sorted(table.keys() - pinned.keys())
    removed = sorted(pinned.keys() - table.keys())
    assert (changed, added, removed) == ([], [], []), (
        f"changed fields: {changed}\nnew fields: {added}\nfields gone: {removed}\n"
        f"if the change is intended: MAILROOM_REGENERATE_GOLDEN=1 .venv/bin/pytest {__file__}"
    )


def test_every_file_a_run_writes_is_read(recorded: Recorded) -> None:
    """A new kind of file in a run fails here until the signature reads it."""
    assert {label: sig.unread for label, sig in recorded.signatures.items()} == {
        label: [] for label, _, _ in RUNS
    }


def test_every_volatile_field_is_one_a_run_records(recorded: Recorded) -> None:
    """The volatile list names no field that is never recorded (a stale entry hides nothing
    today, but would hide a field that later takes its name)."""
    used = set().union(*(sig.volatile_used for sig in recorded.signatures.values()))
    assert sorted(set(VOLATILE_FIELDS) - used) == []


def test_the_kept_images_are_the_ones_the_actor_was_sent(recorded: Recorded) -> None:
    """The full run's kept PNGs hash to what `observation_published` recorded as sent."""
    for attempt_id in recorded.success_ids:
        episode = recorded.success_run / "episodes" / attempt_id
        sent = {
            (event["sequence"], camera): digest
            for event in attempt_events(episode, "observation_published")
            for camera, digest in event["image_sha256"].items()
        }
        kept = {
            (n, camera): sha256_bytes(path.read_bytes())
            for n, camera, path in _numbered(
                episode / "observations", r"obs-(?P<n>\d+)-(?P<rest>.+)\.png"
            )
        }
        assert len(sent) >= 4 and kept == sent


def _copy_run(source: Path, target: Path) -> None:
    """A byte copy of a run directory."""
    for path in source.rglob("*"):
        if path.is_file():
            copy = target / path.relative_to(source)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(path.read_bytes())


def _changed_fields(recorded: Recorded, tmp_path: Path, edit: str, change: Any) -> list[str]:
    """The signature's fields that differ once `change(copy)` edited the file `edit` of
    the first attempt in a copy of the success run."""
    copy = tmp_path / recorded.success_run.name
    _copy_run(recorded.success_run, copy)
    change(copy / "episodes" / recorded.success_ids[0] / edit)
    before = signature(recorded.success_run, recorded.success_ids).table
    after = signature(copy, recorded.success_ids).table
    return [k for k in before if before[k] != after[k]]


def _edit_json_lines(path: Path, line: int, edit: Any) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    document = json.loads(lines[line])
    edit(document)
    lines[line] = json.dumps(document)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_the_signature_sees_a_one_value_change(recorded: Recorded, tmp_path: Path) -> None:
    """The check can fail: one changed step value changes exactly that field's line."""

    def edit(path: Path) -> None:
        _edit_json_lines(path, 0, lambda step: step["action"].__setitem__(0, 0.5))

    assert _changed_fields(recorded, tmp_path, "steps.jsonl", edit) == ["steps.action"]


def test_the_signature_sees_a_changed_observation_field(recorded: Recorded, tmp_path: Path) -> None:
    """What the actor was shown is pinned: one edited observation field changes its line."""

    def edit(path: Path) -> None:
        document = json.loads(path.read_text(encoding="utf-8"))
        document["counters"]["max_controls"] += 1
        path.write_text(json.dumps(document, indent=1), encoding="utf-8")

    changed = _changed_fields(recorded, tmp_path, "observations/obs-1.json", edit)
    assert changed == ["observations.counters.max_controls"]


def test_the_signature_sees_a_changed_png(recorded: Recorded, tmp_path: Path) -> None:
    """The pixels the actor was sent are pinned: one changed byte of one kept PNG."""

    def edit(path: Path) -> None:
        data = bytearray(path.read_bytes())
        data[-20] ^= 0xFF
        path.write_bytes(bytes(data))

    changed = _changed_fields(recorded, tmp_path, "observations/obs-1-agentview.png", edit)
    assert changed == ["images.agentview"]


def test_the_signature_sees_a_changed_launch_message(recorded: Recorded, tmp_path: Path) -> None:
    """The instructions the actor was handed are pinned word for word."""

    def edit(path: Path) -> None:
        document = json.loads(path.read_text(encoding="utf-8"))
        document["instructions"] = document["instructions"].replace("robot arm", "robot  arm")
        path.write_text(json.dumps(document), encoding="utf-8")

    changed = _changed_fields(recorded, tmp_path, "launch_message.json", edit)
    assert changed == ["launch_message.instructions"]


def test_volatile_fields_are_the_only_difference_between_two_runs(
    recorded: Recorded, tmp_path: Path, module_mailbox_root: Path
) -> None:
    """Replacing exactly the volatile fields makes two runs of one plan agree."""
    label, succeed_at, record = RUNS[0]
    ids = _run(tmp_path / label, module_mailbox_root, succeed_at, record)
    assert signature(tmp_path / label, ids).table == recorded.signatures[label].table
