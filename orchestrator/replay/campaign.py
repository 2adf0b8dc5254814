"""Replays a run's attempts in worker processes, one verdict per attempt.

Each worker builds its own simulator and keeps it for the attempts it replays next."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mailroom.orchestrator.families.kept import KeptCatalog, pin_run_catalog
from mailroom.orchestrator.families.registry import family
from mailroom.orchestrator.records.run_directory import (
    AttemptRecord,
    RunDirectory,
    not_a_run_directory,
)
from mailroom.orchestrator.replay.diagnostics import GoalTracker, write_diagnostics
from mailroom.orchestrator.replay.drift import version_drift
from mailroom.orchestrator.replay.recorded import (
    NotReplayableError,
    RecordedAttempt,
    read_recorded,
)
from mailroom.orchestrator.replay.replayer import ReplayVerdict, replay
from mailroom.orchestrator.sim.base import Simulator
from pydantic import BaseModel, ConfigDict

# One simulator per worker process and proprioception setting, reused across attempts.
# A worker's simulators, by the benchmark they run and whether they give proprioception.
_SIMULATORS: dict[tuple[str, bool], Simulator] = {}


class ReplayReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    # package -> [recorded, installed]: a divergence on another stack is drift.
    drift: dict[str, list[str | None]]
    verdicts: list[ReplayVerdict]

    @property
    def all_reproduced(self) -> bool:
        return bool(self.verdicts) and all(v.verdict == "reproduced" for v in self.verdicts)

    def counts(self) -> dict[str, int]:
        out = {"reproduced": 0, "diverged": 0, "not_replayable": 0}
        for verdict in self.verdicts:
            out[verdict.verdict] += 1
        return out


@dataclass(frozen=True)
class Selection:
    """Attempts to replay: those of the named cases or attempt ids (all by default)."""

    names: tuple[str, ...] = ()

    def chosen(self, records: Sequence[AttemptRecord]) -> list[AttemptRecord]:
        if not self.names:
            return list(records)
        wanted = set(self.names)
        return [r for r in records if r.attempt_id in wanted or r.case_id in wanted]


def _task_of(recorded: RecordedAttempt) -> tuple[str, int, int]:
    case = recorded.result.case
    return (case.suite, case.task_index, case.task_order_index)


def _start_worker(kept: KeptCatalog | None) -> None:
    from mailroom.orchestrator.packages.headless import configure_headless_rendering

    configure_headless_rendering()
    if kept is not None:
        kept.pin()  # the run's kept catalog, handed over with the work


def _replay_in_worker(recorded: RecordedAttempt, directory: str) -> dict[str, Any]:
    proprio = recorded.result.settings.proprio
    key = (recorded.result.case.benchmark, proprio)
    simulator = _SIMULATORS.get(key)
    if simulator is None:
        from mailroom.orchestrator.families.registry import simulator_factory

        open_simulator = simulator_factory(recorded.result.case.benchmark)
        simulator = open_simulator(
            control_cap=recorded.result.settings.control_cap, proprio=proprio
        )
        _SIMULATORS[key] = simulator
    simulator.record_frames = False
    goals = GoalTracker()
    try:
        verdict = replay(simulator, recorded, goals)
    except Exception as exc:  # the simulator failed: its state is unknown
        _SIMULATORS.pop(key, None)
        simulator.close()
        return ReplayVerdict(
            attempt_id=recorded.attempt_id,
            verdict="not_replayable",
            reason=f"the simulator failed: {type(exc).__name__}: {exc}"[:1000],
        ).model_dump()
    if verdict.verdict == "not_replayable" or not goals.first_held:
        return verdict.model_dump()
    try:
        write_diagnostics(Path(directory), goals.diagnostics(recorded.attempt_id, verdict.verdict))
        said = "written"
    except (OSError, ValueError) as exc:
        said = f"not written: {exc}"[:500]
    return verdict.model_copy(update={"diagnostics": said}).model_dump()


def replay_run(
    run_dir: Path,
    *,
    selection: Selection = Selection(),
    workers: int = 1,
    on_scheduled: Callable[[int], None] = lambda _: None,
    on_verdict: Callable[[ReplayVerdict], None] = lambda _: None,
) -> ReplayReport:
    run = RunDirectory(run_dir)
    if not run.exists():
        raise FileNotFoundError(not_a_run_directory(run_dir))
    manifest = run.read_manifest()
    kept = pin_run_catalog(run_dir)
    records = selection.chosen(run.attempts())
    verdicts: dict[str, ReplayVerdict] = {}
    runnable: list[tuple[AttemptRecord, RecordedAttempt]] = []
    for record in records:
        try:
            runnable.append((record, read_recorded(record.directory)))
        except NotReplayableError as exc:
            verdicts[record.attempt_id] = ReplayVerdict(
                attempt_id=record.attempt_id, verdict="not_replayable", reason=str(exc)
            )
            on_verdict(verdicts[record.attempt_id])
    on_scheduled(len(records))
    # Attempts of one task one after another: a worker keeps its simulator's scene.
    runnable.sort(key=lambda pair: (_task_of(pair[1]), pair[0].case_id, pair[0].attempt))
    if kept is not None:  # a declared copy must still be the one the run pinned
        family(kept.benchmark).check_local_copy(
            r.result.case.task_index
            for _, r in runnable
            if r.result.case.benchmark == kept.benchmark
        )
    if runnable:
        context = mp.get_context("spawn")
        with ProcessPoolExecutor(
            max_workers=max(1, min(workers, len(runnable))),
            mp_context=context,
            initializer=_start_worker,
            initargs=(kept,),
        ) as pool:
            futures: dict[Future[dict[str, Any]], AttemptRecord] = {
                pool.submit(_replay_in_worker, recorded, str(r.directory)): r
                for r, recorded in runnable
            }
            for future in as_completed(futures):
                record = futures[future]
                try:
                    verdict = ReplayVerdict.model_validate(future.result())
                except Exception as exc:  # the worker process died
                    verdict = ReplayVerdict(
                        attempt_id=record.attempt_id,
                        verdict="not_replayable",
                        reason=f"the replay's worker ended: {type(exc).__name__}: {exc}"[:1000],
                    )
                verdicts[record.attempt_id] = verdict
                on_verdict(verdict)
    ordered = [verdicts[r.attempt_id] for r in records]
    return ReplayReport(
        run_id=str(manifest.get("run_id", run_dir.name)),
        drift=version_drift(manifest),
        verdicts=ordered,
    )
