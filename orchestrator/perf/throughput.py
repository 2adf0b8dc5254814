"""Measures the real coordinator's episodes per hour, and slow actors with slots against none.

Slow actors: live episodes per worker against one episode per process.

`throughput_run` runs the real coordinator (sandboxed diagnostic actors, the real
mailbox and simulator) over given cases. `slow_actor_comparison` uses it twice. Real LLM
actors think 10-100 s per decision while the simulator works ~0.3 s, so a
campaign is bounded by how many episodes are live at once, which memory bounds. One run
measures, side by side, the same work (episodes over four tasks, D decisions at K, a
sandboxed actor process that thinks T seconds per decision):

- multiplexed: 2 workers with enough slots to fill the memory above the margin
  (admission decides how many are live);
- one episode per process: as many single-slot workers as the same memory holds,
  each costing what the multiplexed run measured a worker's first simulator to cost.

It also reports the marginal resident memory of one more live episode (each new
simulator's cost as its worker measured it), the queueing delay's p95 and the most
episodes live at once.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mailroom.measures import percentile
from mailroom.orchestrator.campaign.capacity.memory import (
    FIRST_SIMULATOR_MB,
    MemoryPolicy,
    capacity,
    machine_memory,
)
from mailroom.orchestrator.campaign.coordinator import Executor
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.records.event_log import read_log
from mailroom.orchestrator.records.layout import AttemptPaths, RunPaths
from mailroom.orchestrator.sim.parked import Holding

TASKS = (0, 1, 2, 3)
PROFILE = "scripted_diagnostic"
MAX_SLOTS_PER_WORKER = 20


@dataclass
class _Tally:
    """What the listener hears from the workers during one throughput run."""

    finished_at: list[float] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)
    peaks_mb: list[float] = field(default_factory=list)
    first_costs_mb: list[float] = field(default_factory=list)
    further_costs_mb: list[float] = field(default_factory=list)
    # A worker's whole resident set once its first simulator's episode has started.
    first_worker_rss_mb: list[float] = field(default_factory=list)
    live: int = 0
    max_live: int = 0
    # When the last simulator was built (monotonic s): later growth is episodes'.
    last_build_at: float | None = None

    def hear(self, kind: str, payload: tuple[Any, ...]) -> None:
        if kind == "started":
            self.live += 1
            self.max_live = max(self.max_live, self.live)
        elif kind in ("finished", "crashed"):
            self.live -= 1
            self.finished_at.append(time.perf_counter())
            if kind == "finished":
                self.outcomes.append(str(payload[2]))
                self.peaks_mb.append(float(payload[3]))
            else:
                self.outcomes.append("crashed")
        elif kind == "simulator_built":
            self.last_build_at = time.monotonic()
            cost, before = float(payload[2]), int(payload[3])
            (self.first_costs_mb if before == 0 else self.further_costs_mb).append(cost)
            if before == 0:
                self.first_worker_rss_mb.append(float(payload[4]))


def cases_over_tasks(episodes: int) -> list[Case]:
    per_task = max(1, math.ceil(episodes / len(TASKS)))
    return [
        Case(suite="libero_10", task_index=t, init_state_index=s, seed=7)
        for t in TASKS
        for s in range(per_task)
    ][:episodes]


def throughput_run(
    *,
    cases: Sequence[Case],
    workers: int,
    slots: int,
    think_s: float,
    decisions: int,
    k: int,
    run_dir: Path,
    mailbox_root: Path,
    memory: MemoryPolicy | None = None,
    executor: Executor | None = None,
    holding: Holding = "dedicated",
) -> dict[str, Any]:
    """The real coordinator over `cases`: sandboxed diagnostic actors thinking
    `think_s` per decision, `workers` x `slots`; figures of the whole run. `executor`:
    the local one by default; `holding`: a simulator per live episode by default (the
    figures measured before episodes were parked), or parked."""
    from mailroom.orchestrator.actors.confinement import ConfinementSettings
    from mailroom.orchestrator.actors.launcher import profile_launcher
    from mailroom.orchestrator.actors.profiles import load_profile
    from mailroom.orchestrator.campaign.coordinator import LaunchConfig, LocalExecutor, Work
    from mailroom.orchestrator.campaign.manifest import build_manifest
    from mailroom.orchestrator.catalog.plans import render_plan
    from mailroom.orchestrator.families.plans import build_plan
    from mailroom.orchestrator.records.run_directory import RunDirectory

    settings = RunSettings(max_policy_calls=decisions, replan_interval=k, response_timeout_s=600)
    profile = load_profile(PROFILE)
    actor = [
        "{python}",
        str(profile.directory / "actor.py"),
        "{endpoint}",
        "--chunks",
        str(decisions),
        "--think",
        str(think_s),
    ]
    confinement = ConfinementSettings(mode="sandbox")
    launcher = profile_launcher(
        actor,
        profile=profile,
        confinement=confinement,
        limits=profile.profile.limits,
        run_dir=run_dir,
        mailbox_root=mailbox_root,
    )
    assert launcher is not None and launcher.sandbox is not None
    plan = build_plan("canonical", suite="libero_10")
    run = RunDirectory(run_dir)
    run.write_manifest(
        build_manifest(
            run_id=run_dir.name,
            plan_sha256=plan.plan_sha256,
            plan_kind=plan.kind,
            n_cases=len(cases),
            profile_name=PROFILE,
            profile_declaration=profile.profile.declaration(),
            settings=settings,
            actor_command=actor,
            record="minimal",
            run_dir=run_dir,
            mailbox_root=mailbox_root,
            workers=workers,
            confinement=confinement,
            sandbox_tool=launcher.sandbox.tool,
        )
    )
    run.plan_path.write_bytes(render_plan(plan))
    config = LaunchConfig(
        run_dir=run_dir,
        mailbox_root=mailbox_root,
        settings=settings,
        record="minimal",
        launcher=launcher,
        slots=slots,
        holding=holding,
        memory=memory or MemoryPolicy(),
    )
    tally = _Tally()
    started = time.perf_counter()
    lost = (
        (executor or LocalExecutor())
        .run(config, [Work(c, 1) for c in cases], workers, tally.hear)
        .lost
    )
    elapsed = time.perf_counter() - started
    if lost or len(tally.outcomes) != len(cases) or "error" in tally.outcomes:
        raise RuntimeError(f"throughput run {run_dir.name} had errors: {lost or tally.outcomes}")
    queue_s = [d / 1000 for d in decision_field(run_dir, "queue_delay_ms")]
    steady = steady_rate(tally.finished_at, workers)
    return {
        "workers": workers,
        "slots": slots,
        "holding": holding,
        "think_s": think_s,
        "episodes": len(cases),
        "wall_s": round(elapsed, 1),
        "episodes_per_hour": round(len(cases) * 3600 / elapsed, 1),
        "episodes_per_hour_all_busy": round(steady, 1) if steady is not None else None,
        "max_live_episodes": tally.max_live,
        **{
            f"queue_delay_ms_p{round(q * 100)}": (
                round(percentile(queue_s, q) * 1000, 1) if queue_s else None
            )
            for q in (0.5, 0.9, 0.95, 0.99)
        },
        "queue_delay_ms_max": round(max(queue_s) * 1000, 1) if queue_s else None,
        "decisions": len(queue_s),
        "first_simulator_mb": _median(tally.first_costs_mb),
        "worker_with_one_episode_mb": _median(tally.first_worker_rss_mb),
        "further_simulator_mb": _median(tally.further_costs_mb),
        "further_simulators": len(tally.further_costs_mb),
        "peak_rss_mb_per_worker": round(max(tally.peaks_mb), 1) if tally.peaks_mb else None,
        "last_simulator_built_at": tally.last_build_at,
    }


def steady_rate(finished_at: Sequence[float], workers: int) -> float | None:
    """Episodes per hour while every worker is busy: between the `workers`-th finish
    (each worker has started up and built its first simulator) and the last finish
    before the tail, where workers run out of work one by one."""
    times = sorted(finished_at)
    first, last = workers - 1, len(times) - workers
    if last <= first or times[last] <= times[first]:
        return None
    return (last - first) * 3600 / (times[last] - times[first])


def _median(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def decision_field(run_dir: Path, name: str) -> list[float]:
    """One number of every `decision_served` record of a run, e.g. `queue_delay_ms`."""
    values: list[float] = []
    for folder in sorted(RunPaths(run_dir).episodes.iterdir()):
        for served in read_log(AttemptPaths(folder).events, kinds=("decision_served",)).records:
            value = served.get(name)
            if isinstance(value, (int, float)):
                values.append(float(value))
    return values


def slow_actor_comparison(
    *,
    think_s: float,
    decisions: int,
    k: int,
    episodes: int | None,
    workdir: Path,
    mailbox_root: Path,
    label: str,
) -> dict[str, Any]:
    """Multiplexed (2 workers, slots to fill memory) against one episode per process at
    the same memory budget, on the same work, one after the other in this run."""
    policy = MemoryPolicy()
    workers = 2  # one per core
    # Slots to spare: admission, with each worker's measured costs, decides how many
    # are live (the estimate before the start uses the conservative defaults).
    fits = capacity(policy, workers=workers, slots=10_000)
    slots = MAX_SLOTS_PER_WORKER
    n = episodes or max(8, 3 * fits.live_episodes)
    cases = cases_over_tasks(n)
    multiplexed = throughput_run(
        cases=cases,
        workers=workers,
        slots=slots,
        think_s=think_s,
        decisions=decisions,
        k=k,
        run_dir=workdir / f"{label}-multiplexed",
        mailbox_root=mailbox_root / f"{label}-mx",
    )
    # The same memory, one live episode per process: each process costs what a worker
    # held with its first episode in the multiplexed run (imports and renderer included).
    per_process = max(multiplexed["worker_with_one_episode_mb"] or FIRST_SIMULATOR_MB, 1.0)
    memory = machine_memory()
    usable = memory.available_mb - policy.margin * memory.total_mb
    solo_workers = max(1, int(usable // per_process))
    solo = throughput_run(
        cases=cases,
        workers=solo_workers,
        slots=1,
        think_s=think_s,
        decisions=decisions,
        k=k,
        run_dir=workdir / f"{label}-solo",
        mailbox_root=mailbox_root / f"{label}-solo",
    )
    ratio = multiplexed["episodes_per_hour"] / solo["episodes_per_hour"]
    return {
        "think_s": think_s,
        "episodes_per_hour_ratio": round(ratio, 3),
        "one_per_process_mb": round(per_process, 1),
        "memory_usable_mb": round(usable, 1),
        "estimated_live_capacity": fits.live_episodes,
        "multiplexed": multiplexed,
        "one_per_process": solo,
    }
