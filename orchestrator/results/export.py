"""Export a run as three Parquet tables: `episodes.parquet`, `steps.parquet` and
`provider_requests.parquet`.

episodes: one row per result document, in plan order then attempt order; earlier
attempts of a case are kept and flagged `superseded`. Video columns hold each camera's
MP4 path relative to the run directory, or null; `group` is the report's group of the
case (a LIBERO-Plus perturbation category, a LIBERO-Para paraphrase cell), or null;
`simulator` is how the episode's simulator was held (`parked`, `dedicated`, `none` if the
episode never started), null for a result before `mailroom.episode_result/v5`;
`enforcement.memory` (`enforced`, `not enforced`) and `enforcement.writable_space`
(`kernel`, `sampled`) say whether the kernel enforced the actor's limits, null for a
result before `mailroom.episode_result/v6`. The `usage.*` columns are what the provider
gateway metered of the episode's actor (`records/result.py`'s `ProviderUsage`): its
provider, requests forwarded, refused, failed, other and without complete usage, tokens,
`usage.cost_usd` (null with `usage.cost_note` where an answer could not be priced), the
declared model, `usage.model_verified`, the answering models and the provider time. Where
nothing metered it every one of them is null, never 0, and `usage.unmetered_reason` says
why (`before_v7`, `external_actor`, `no_gateway`, `no_gate`: `results/usage.py`).

steps: one row per executed control, read from each attempt's `steps.jsonl`, in the
LeRobot-aligned fields `episode_index`, `frame_index`, `timestamp`, `action`,
`observation.state` (only when the run's proprio track was on: the state *before* the
row's action, the first row's from the first observation; `mailroom.export/v1` had the
state the control ended in), `next.done`, `next.success` (the native scorer's verdict
after the row's action), plus `policy_call`. `mailroom export --format lerobot` writes
a LeRobot dataset instead (`results/lerobot_export.py`).

provider_requests: one row per model request the gateway saw, read from each exported
episode's `provider-requests.jsonl` (`results/provider_requests.py`), keyed by
`episode_index` as steps are: its decision, route, outcome, status, the model asked for
and the one that answered, tokens, cost, times and sizes; never a body or a header. It
sits beside the steps because it is the same kind of thing at a finer grain than the
episode: what happened during it, in order. A run without the gateway has an empty one.

Corrupt or missing result documents and unusable steps files are skipped and listed;
an episode whose steps are missing or skipped still has its episodes row (`steps` null).
A requests file that cannot be trusted is skipped the same way (its episode keeps its
row and its usage columns, which are the result's). Every file is written under a
temporary name in the output directory and renamed whole.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq
from mailroom.hashing import sha256_bytes
from mailroom.mailbox.publish import fsync_directory
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.catalog.entries import CatalogError
from mailroom.orchestrator.catalog.plans import PlanError
from mailroom.orchestrator.families.base import UnknownBenchmarkError
from mailroom.orchestrator.families.kept import pin_run_catalog
from mailroom.orchestrator.families.plans import parse_plan
from mailroom.orchestrator.families.registry import family, run_family_errors
from mailroom.orchestrator.records.disclosures import disclosed_attempts
from mailroom.orchestrator.records.layout import AttemptPaths
from mailroom.orchestrator.records.result import (
    SUMMED_COUNTERS,
    TOKEN_COUNTS,
    EpisodeResult,
    ProviderUsage,
)
from mailroom.orchestrator.records.run_directory import (
    CorruptResult,
    RunDirectory,
    not_a_run_directory,
)
from mailroom.orchestrator.results.provider_requests import (
    RequestsFileError,
    read_requests,
    requests_schema,
)
from mailroom.orchestrator.results.reporter import case_group
from mailroom.orchestrator.results.steps_file import (
    STATE_DIM,
    STATE_LAYOUT,
    StepRows,
    StepsFileError,
    read_steps,
    start_state,
    states_before,
)
from mailroom.orchestrator.results.usage import unmetered_reason
from mailroom.orchestrator.sim.specs import ActionSpec

# v2: a step's `observation.state` is the state before its action (v1 had the state the
# control ended in, one control late for LeRobot's convention).
EXPORT_FORMAT = "mailroom.export/v2"
EPISODES_PARQUET = "episodes.parquet"
STEPS_PARQUET = "steps.parquet"
REQUESTS_PARQUET = "provider_requests.parquet"
DEFAULT_EXPORT_DIR = "export"
ROWS_PER_GROUP = 65536


class ExportError(Exception):
    """The run cannot be exported at all; the message is meant for people."""


@dataclass(frozen=True)
class Skipped:
    file: str  # relative to the run directory
    reason: str


@dataclass(frozen=True)
class ExportSummary:
    out_dir: Path
    episodes_file: Path
    steps_file: Path
    requests_file: Path
    episodes: int
    steps: int
    requests: int
    proprio: bool
    cameras: tuple[str, ...]
    skipped: list[Skipped] = field(default_factory=list)

    def document(self) -> dict[str, Any]:
        return {
            "format": "parquet",
            "out": str(self.out_dir),
            "files": {
                "episodes": str(self.episodes_file),
                "steps": str(self.steps_file),
                "provider_requests": str(self.requests_file),
            },
            "rows": {
                "episodes": self.episodes,
                "steps": self.steps,
                "provider_requests": self.requests,
            },
            "proprio": self.proprio,
            "cameras": list(self.cameras),
            "skipped": [{"file": s.file, "reason": s.reason} for s in self.skipped],
        }


@dataclass(frozen=True)
class _Episode:
    index: int
    attempt: int
    directory: Path
    result: EpisodeResult
    superseded: bool


# schemas -------------------------------------------------------------------------------


def steps_schema(proprio: bool, dimension: int) -> pa.Schema:
    fields = [
        pa.field("episode_index", pa.int64(), nullable=False),
        pa.field("frame_index", pa.int64(), nullable=False),
        pa.field("timestamp", pa.float32(), nullable=False),
        pa.field("action", pa.list_(pa.float32(), dimension), nullable=False),
    ]
    if proprio:
        fields.append(
            pa.field("observation.state", pa.list_(pa.float32(), STATE_DIM), nullable=False)
        )
    fields += [
        pa.field("next.done", pa.bool_(), nullable=False),
        pa.field("next.success", pa.bool_(), nullable=False),
        pa.field("policy_call", pa.int64(), nullable=False),
    ]
    return pa.schema(fields)


def episodes_schema(cameras: Sequence[str]) -> pa.Schema:
    text, integer = pa.string(), pa.int64()
    fields = [
        ("episode_index", integer),
        ("attempt_id", text),
        ("case_id", text),
        ("attempt", integer),
        ("superseded", pa.bool_()),
        ("benchmark", text),
        ("suite", text),
        ("task_index", integer),
        ("task_name", text),
        ("group", text),
        ("instruction", text),
        ("init_state_index", integer),
        ("task_order_index", integer),
        ("seed", integer),
        ("outcome", text),
        ("termination", text),
        ("truncated", pa.bool_()),
        ("truncation", text),
        *((name, integer) for name in SUMMED_COUNTERS),
        ("first_success_control", integer),
        ("first_success_policy_call", integer),
        ("error_codes", pa.list_(text)),
        ("blinded", pa.bool_()),
        ("leak_disclosed", pa.bool_()),
        ("confinement", text),
        ("simulator", text),
        ("enforcement.memory", text),
        ("enforcement.writable_space", text),
        ("proprio", pa.bool_()),
        ("bddl_sha256", text),
        ("init_states_sha256", text),
        ("state_sha256", text),
        ("started_at", text),
        ("finished_at", text),
        ("wall_time_s", pa.float64()),
        ("steps", integer),
        *((f"videos.{camera}", text) for camera in cameras),
        *USAGE_COLUMNS,
    ]
    return pa.schema(fields)


# What the gateway metered of an episode's actor (all null where nothing metered it).
USAGE_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("usage.unmetered_reason", pa.string()),
    ("usage.provider", pa.string()),
    ("usage.requests", pa.int64()),
    ("usage.refused_requests", pa.int64()),
    ("usage.failed_requests", pa.int64()),
    ("usage.other_requests", pa.int64()),
    ("usage.unmetered_requests", pa.int64()),
    *((f"usage.{name}", pa.int64()) for name in TOKEN_COUNTS),
    ("usage.cost_usd", pa.float64()),
    ("usage.cost_note", pa.string()),
    ("usage.declared_model", pa.string()),
    ("usage.model_verified", pa.bool_()),
    ("usage.answering_models", pa.list_(pa.string())),
    ("usage.provider_time_ms", pa.float64()),
)


def usage_columns(result: EpisodeResult) -> dict[str, Any]:
    """The episode's `usage.*` values: what the gateway metered, or nulls and the reason."""
    row: dict[str, Any] = dict.fromkeys((name for name, _ in USAGE_COLUMNS), None)
    row["usage.unmetered_reason"] = unmetered_reason(result)
    u = result.usage
    if isinstance(u, ProviderUsage):
        row.update(
            {
                "usage.provider": u.provider,
                "usage.requests": u.provider_requests,
                "usage.refused_requests": u.refused_requests,
                "usage.failed_requests": u.failed_requests,
                "usage.other_requests": u.other_requests,
                "usage.unmetered_requests": u.unmetered_requests,
                **{f"usage.{name}": getattr(u, name) for name in TOKEN_COUNTS},
                "usage.cost_usd": u.cost,
                "usage.cost_note": u.cost_note,
                "usage.declared_model": u.declared_model,
                "usage.model_verified": u.model_verified,
                "usage.answering_models": [m.model for m in u.models],
                "usage.provider_time_ms": u.provider_time_ms,
            }
        )
    return row


def _metadata(
    manifest: dict[str, Any], proprio: bool, cameras: Sequence[str], action: ActionSpec
) -> dict[str, str]:
    layout: dict[str, Any] = {
        "format": EXPORT_FORMAT,
        "run_id": manifest.get("run_id"),
        "fps": action.control_hz,
        "action_names": list(action.layout),
        "cameras": list(cameras),
        "proprio": proprio,
    }
    if proprio:
        layout["state_names"] = list(STATE_LAYOUT)
        layout["observation_state"] = "before_action"
    return {"mailroom": json.dumps(layout, sort_keys=True)}


# writing -------------------------------------------------------------------------------


@contextmanager
def published_file(path: Path) -> Iterator[Path]:
    """A temporary path beside `path`, renamed onto it only if the block succeeds."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        yield temporary
        fd = os.open(temporary, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    fsync_directory(path.parent)


def publish_folder(temporary: Path, out: Path, ours: Callable[[Path], bool], what: str) -> None:
    """Rename a finished export folder onto `out`, replacing one this export wrote there
    before (`ours` says so of a folder); anything else at `out` is refused (and
    `temporary` removed)."""
    if out.exists() and not (out.is_dir() and not any(out.iterdir())):
        if not ours(out):
            shutil.rmtree(temporary, ignore_errors=True)
            raise ExportError(
                f"{out} exists and is not a {what} this export wrote: name another --out"
            )
        old = out.with_name(f".{out.name}.{secrets.token_hex(4)}.old")
        out.rename(old)
        temporary.rename(out)
        shutil.rmtree(old, ignore_errors=True)
        return
    if out.exists():
        out.rmdir()
    temporary.rename(out)


def run_identity(run: RunDirectory, manifest: dict[str, Any]) -> dict[str, Any]:
    """What identifies the run in an export, never a path of this machine."""
    protocol = manifest.get("protocol", {})
    profile = manifest.get("profile", {})
    return {
        "run_id": manifest.get("run_id"),
        "manifest_schema": manifest.get("schema"),
        "manifest_sha256": sha256_bytes(run.manifest_path.read_bytes()),
        "plan_sha256": protocol.get("plan_sha256"),
        "benchmark": protocol.get("benchmark"),
        "profile": profile.get("name"),
        "profile_declaration_sha256": profile.get("declaration_sha256"),
        "record": manifest.get("record"),
        "mailbox_protocol": protocol.get("mailbox_protocol"),
        "camera_transform": protocol.get("camera_transform"),
    }


class _StepsWriter:
    """Buffers a bounded number of step rows, then writes them as one row group."""

    def __init__(self, writer: pq.ParquetWriter, schema: pa.Schema, action: ActionSpec) -> None:
        self._writer = writer
        self._schema = schema
        self._action = action
        self._pending: list[tuple[int, StepRows]] = []
        self._pending_rows = 0
        self.rows = 0

    def add(self, episode_index: int, steps: StepRows) -> None:
        if len(steps) == 0:
            return
        self._pending.append((episode_index, steps))
        self._pending_rows += len(steps)
        if self._pending_rows >= ROWS_PER_GROUP:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        self._writer.write_table(self._table())
        self.rows += self._pending_rows
        self._pending, self._pending_rows = [], 0

    def _table(self) -> pa.Table:
        parts = self._pending
        frame_index = np.concatenate([s.frame_index for _, s in parts])
        done = np.concatenate([np.arange(len(s)) == len(s) - 1 for _, s in parts])
        columns: dict[str, pa.Array] = {
            "episode_index": pa.array(
                np.concatenate([np.full(len(s), i, dtype=np.int64) for i, s in parts])
            ),
            "frame_index": pa.array(frame_index),
            "timestamp": pa.array((frame_index / self._action.control_hz).astype(np.float32)),
            "action": _fixed_list(
                np.concatenate([s.action for _, s in parts]), self._action.dimension
            ),
        }
        if "observation.state" in self._schema.names:
            states = [s.state for _, s in parts]
            columns["observation.state"] = _fixed_list(
                np.concatenate([x for x in states if x is not None]), STATE_DIM
            )
        columns["next.done"] = pa.array(done)
        columns["next.success"] = pa.array(np.concatenate([s.success for _, s in parts]))
        columns["policy_call"] = pa.array(np.concatenate([s.policy_call for _, s in parts]))
        return pa.Table.from_pydict(columns, schema=self._schema)


def _fixed_list(matrix: npt.NDArray[np.float32], size: int) -> pa.Array:
    return pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), size)


# the run -------------------------------------------------------------------------------


def _relative(run: RunDirectory, path: Path) -> str:
    return path.relative_to(run.root).as_posix()


def _episodes(
    run: RunDirectory, plan_order: dict[str, int]
) -> tuple[list[_Episode], list[Skipped]]:
    skipped: list[Skipped] = []
    found: list[tuple[int, int, Path, EpisodeResult]] = []
    for record in run.attempts():
        result_file = _relative(run, AttemptPaths(record.directory).result)
        if record.result is None:
            skipped.append(Skipped(result_file, "missing: the attempt is in progress or ended"))
        elif isinstance(record.result, CorruptResult):
            skipped.append(Skipped(result_file, f"corrupt: {record.result.reason}"))
        elif record.result.attempt_id != record.attempt_id:
            reason = f"names attempt {record.result.attempt_id}, not its directory's"
            skipped.append(Skipped(result_file, reason))
        elif record.case_id not in plan_order:
            skipped.append(Skipped(result_file, "its case is not in the run's plan"))
        else:
            found.append(
                (plan_order[record.case_id], record.attempt, record.directory, record.result)
            )
    found.sort(key=lambda item: (item[0], item[1]))
    last_attempt = {result.case_id: attempt for _, attempt, _, result in found}
    episodes = [
        _Episode(n, attempt, directory, result, attempt != last_attempt[result.case_id])
        for n, (_, attempt, directory, result) in enumerate(found)
    ]
    return episodes, skipped


def _steps_for(episode: _Episode, proprio: bool, dimension: int) -> StepRows | None:
    """The episode's steps, each state the one before its action; None when it has no
    steps.jsonl; raises StepsFileError."""
    paths = AttemptPaths(episode.directory)
    if not paths.steps.exists():
        return None
    steps = read_steps(paths.steps, proprio=proprio, dimension=dimension)
    result = episode.result
    if result.outcome != "error" and len(steps) != result.counters.executed_controls:
        raise StepsFileError(
            f"{len(steps)} steps for {result.counters.executed_controls} executed controls"
        )
    if steps.state is not None and len(steps):
        before = states_before(start_state(paths.observation(1)), steps.state)
        steps = dataclasses.replace(steps, state=before)
    return steps


def _video_paths(run: RunDirectory, episode: _Episode, cameras: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for camera in cameras:
        path = AttemptPaths(episode.directory).video(camera)
        out[f"videos.{camera}"] = _relative(run, path) if path.is_file() else None
    return out


def _group(result: EpisodeResult) -> str | None:
    """The report's group of the episode's case: a LIBERO-Plus case's perturbation
    category, a LIBERO-Para case's paraphrase cell (as the run's kept catalog names it),
    None for other benchmarks."""
    c = result.case
    case = Case(
        benchmark=c.benchmark,
        suite=c.suite,
        task_index=c.task_index,
        init_state_index=c.init_state_index,
        seed=c.seed,
    )
    return case_group(case, result)


def _episode_row(
    run: RunDirectory,
    episode: _Episode,
    *,
    disclosed: set[str],
    steps: int | None,
    cameras: Sequence[str],
) -> dict[str, Any]:
    r = episode.result
    c = r.counters
    leaked = r.attempt_id in disclosed
    return {
        "episode_index": episode.index,
        "attempt_id": r.attempt_id,
        "case_id": r.case_id,
        "attempt": episode.attempt,
        "superseded": episode.superseded,
        "benchmark": r.case.benchmark,
        "suite": r.case.suite,
        "task_index": r.case.task_index,
        "task_name": r.case.task_name,
        "group": _group(r),
        "instruction": r.case.instruction,
        "init_state_index": r.case.init_state_index,
        "task_order_index": r.case.task_order_index,
        "seed": r.case.seed,
        "outcome": r.outcome,
        "termination": r.termination,
        "truncated": r.truncated,
        "truncation": r.truncation,
        **{name: int(getattr(c, name)) for name in SUMMED_COUNTERS},
        "first_success_control": c.first_success_control,
        "first_success_policy_call": c.first_success_policy_call,
        "error_codes": [e.code for e in r.errors],
        "blinded": r.blinded and not leaked,
        "leak_disclosed": leaked,
        # v1 results predate confinement: their spawned actors were not confined.
        "confinement": None if r.confinement is None else r.confinement.mode,
        # v1 to v4 results do not say how their simulator was held: null, never a guess.
        "simulator": r.simulator,
        # v1 to v5 results do not say what the kernel enforced: null.
        "enforcement.memory": None if r.enforcement is None else r.enforcement.memory,
        "enforcement.writable_space": (
            None if r.enforcement is None else r.enforcement.writable_space
        ),
        "proprio": r.settings.proprio,
        "bddl_sha256": r.case.bddl_sha256,
        "init_states_sha256": r.case.init_states_sha256,
        "state_sha256": r.case.state_sha256,
        "started_at": r.started_at,
        "finished_at": r.finished_at,
        "wall_time_s": r.wall_time_s,
        "steps": steps,
        **_video_paths(run, episode, cameras),
        **usage_columns(r),
    }


def _requests_table(
    run: RunDirectory, episodes: Sequence[_Episode], skipped: list[Skipped]
) -> pa.Table:
    """Every exported episode's provider requests, in episode order then request order;
    a file that cannot be trusted is skipped and listed."""
    rows: list[dict[str, Any]] = []
    for episode in episodes:
        path = AttemptPaths(episode.directory).provider_requests
        try:
            found = read_requests(path, episode.result.usage)
        except RequestsFileError as exc:
            skipped.append(Skipped(_relative(run, path), str(exc)))
            continue
        if found is not None:
            rows += found.rows(episode.index, episode.result.attempt_id)
    return pa.Table.from_pylist(rows, schema=requests_schema())


@dataclass(frozen=True)
class LoadedRun:
    """A run as every export reads it: its checked manifest, each planned case's place
    in its plan, and the action spec of its plan's family."""

    manifest: dict[str, Any]
    order: dict[str, int]
    action: ActionSpec


def load_run(run: RunDirectory) -> LoadedRun:
    """The run, checked; raises ExportError when it cannot be read at all (every export
    format starts here)."""
    if not run.exists():
        raise ExportError(not_a_run_directory(run.root))
    try:
        manifest = run.read_manifest()
    except (OSError, ValueError) as exc:
        raise ExportError(f"cannot read {run.manifest_path}: {exc}") from exc
    errors = run_family_errors(manifest)
    if errors:
        raise ExportError(f"{run.manifest_path} names what this evaluator lacks: {errors[0]}")
    try:
        plan = parse_plan(run.plan_path.read_bytes(), check_catalog=False)
    except (OSError, PlanError) as exc:
        raise ExportError(f"cannot read the run's plan {run.plan_path}: {exc}") from exc
    try:
        pin_run_catalog(run.root)  # its cases' groups as the run's kept catalog names them
    except CatalogError as exc:
        raise ExportError(str(exc)) from exc
    order = {case.case_id: n for n, case in enumerate(plan.to_cases())}
    try:
        action = family(plan.benchmark).action_spec
    except UnknownBenchmarkError as exc:  # a manifest before v4 names no family: its plan does
        raise ExportError(f"{run.plan_path} names what this evaluator lacks: {exc}") from exc
    return LoadedRun(manifest, order, action)


def export_parquet(run_dir: Path, out_dir: Path | None = None) -> ExportSummary:
    """Write `episodes.parquet`, `steps.parquet` and `provider_requests.parquet` for
    `run_dir` into `out_dir` (default `run_dir/export`); raises ExportError when the run
    cannot be read at all."""
    run = RunDirectory(run_dir)
    loaded = load_run(run)
    manifest, plan_order, action = loaded.manifest, loaded.order, loaded.action
    proprio = bool(manifest["settings"]["proprio"])
    cameras = tuple(str(c) for c in manifest["protocol"]["cameras"])
    out = out_dir if out_dir is not None else run_dir / DEFAULT_EXPORT_DIR
    out.mkdir(parents=True, exist_ok=True)
    episodes, skipped = _episodes(run, plan_order)
    disclosed = disclosed_attempts(run)
    metadata = _metadata(manifest, proprio, cameras, action)

    rows: list[dict[str, Any]] = []
    schema = steps_schema(proprio, action.dimension).with_metadata(metadata)
    steps_path = out / STEPS_PARQUET
    with published_file(steps_path) as temporary, pq.ParquetWriter(temporary, schema) as parquet:
        writer = _StepsWriter(parquet, schema, action)
        for episode in episodes:
            try:
                steps = _steps_for(episode, proprio, action.dimension)
            except StepsFileError as exc:
                steps_file = AttemptPaths(episode.directory).steps
                skipped.append(Skipped(_relative(run, steps_file), str(exc)))
                steps = None
            if steps is not None:
                writer.add(episode.index, steps)
            count = None if steps is None else len(steps)
            rows.append(
                _episode_row(run, episode, disclosed=disclosed, steps=count, cameras=cameras)
            )
        writer.flush()
    requests_path = out / REQUESTS_PARQUET
    requests = _requests_table(run, episodes, skipped).replace_schema_metadata(metadata)
    with published_file(requests_path) as temporary:
        pq.write_table(requests, temporary)
    table = pa.Table.from_pylist(rows, schema=episodes_schema(cameras).with_metadata(metadata))
    episodes_path = out / EPISODES_PARQUET
    with published_file(episodes_path) as temporary:
        pq.write_table(table, temporary)
    return ExportSummary(
        out_dir=out,
        episodes_file=episodes_path,
        steps_file=steps_path,
        requests_file=requests_path,
        episodes=table.num_rows,
        steps=writer.rows,
        requests=requests.num_rows,
        proprio=proprio,
        cameras=cameras,
        skipped=skipped,
    )
