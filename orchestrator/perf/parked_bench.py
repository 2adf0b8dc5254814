"""The parked section of the benchmark: parked episodes against a simulator each.

The same kind of work twice, one after the other in one run: episodes over four
LIBERO-10 tasks, D decisions at K, a sandboxed diagnostic actor thinking T seconds per
decision (T=40 s, D=10 by default: an agent's pace), under one `--max-memory` cap that
holds about eight dedicated simulators (a first one and seven more):

- dedicated: 2 workers, a simulator per live episode, as many live as the cap holds;
- parked: 2 workers under the same cap, their episodes parked on two simulators per
  task, as many live as the CPU keeps up with (`--slots` 150 each as the cap).

Figures: episodes per hour of each and their ratio; the most episodes live at once
when parked and their queueing delay p95; how a worker's resident memory grows per
further live episode (the slope over samples taken after the last simulator was built, actors
excluded) and the actors' own memory per episode beside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mailroom.orchestrator.campaign.capacity.memory import (
    FIRST_SIMULATOR_MB,
    FURTHER_SIMULATOR_MB,
    MemoryPolicy,
)
from mailroom.orchestrator.perf.process_sampler import ProcessSampler, slope
from mailroom.orchestrator.perf.throughput import cases_over_tasks, throughput_run

THINK_S = 40.0
DECISIONS = 10
PARKED_SLOTS_PER_WORKER = 150
WORKERS = 2
DEDICATED_SIMULATORS = 8


def memory_cap_mb(simulators: int = DEDICATED_SIMULATORS) -> float:
    """A cap that holds `simulators` dedicated simulators at admission's estimates."""
    return FIRST_SIMULATOR_MB + (simulators - 1) * FURTHER_SIMULATOR_MB


def parked_comparison(
    *,
    workdir: Path,
    mailbox_root: Path,
    k: int,
    think_s: float = THINK_S,
    decisions: int = DECISIONS,
    parked_episodes: int = 2 * WORKERS * PARKED_SLOTS_PER_WORKER // 3,
    dedicated_episodes: int = 2 * DEDICATED_SIMULATORS,
) -> dict[str, Any]:
    """Both settings on the same cap; see the module docstring."""
    policy = MemoryPolicy(max_memory_mb=memory_cap_mb())
    with ProcessSampler() as sampler:
        parked = throughput_run(
            cases=cases_over_tasks(parked_episodes),
            workers=WORKERS,
            slots=PARKED_SLOTS_PER_WORKER,
            think_s=think_s,
            decisions=decisions,
            k=k,
            run_dir=workdir / "parked",
            mailbox_root=mailbox_root / "parked",
            memory=policy,
            holding="parked",
        )
    dedicated = throughput_run(
        cases=cases_over_tasks(dedicated_episodes),
        workers=WORKERS,
        slots=DEDICATED_SIMULATORS,
        think_s=think_s,
        decisions=decisions,
        k=k,
        run_dir=workdir / "dedicated",
        mailbox_root=mailbox_root / "dedicated",
        memory=policy,
        holding="dedicated",
    )
    samples = sampler.samples
    # The workers' memory against how many episodes are live, once the last simulator
    # was built (before, each build adds half a gigabyte): its slope is what one more
    # live episode costs a worker.
    built = parked.pop("last_simulator_built_at") or 0.0
    growth = [(float(s.actors), s.workers_mb) for s in samples if s.t > built and s.actors]
    peak = max(samples, key=lambda s: s.actors, default=None)
    per_episode = slope(growth)
    ratio = None
    if dedicated["episodes_per_hour"]:
        ratio = round(parked["episodes_per_hour"] / dedicated["episodes_per_hour"], 3)
    return {
        "think_s": think_s,
        "decisions": decisions,
        "memory_cap_mb": memory_cap_mb(),
        "parked_live_episodes_reached": parked["max_live_episodes"],
        "parked_queue_delay_ms_p95": parked["queue_delay_ms_p95"],
        "mb_per_parked_episode": round(per_episode, 2) if per_episode is not None else None,
        "actor_mb_per_episode": (
            round(peak.actors_mb / peak.actors, 1) if peak is not None and peak.actors else None
        ),
        "parked_over_dedicated_episodes_per_hour_ratio": ratio,
        "samples": len(samples),
        "samples_after_last_build": len(growth),
        "peak_sample": None
        if peak is None
        else {
            "actors": peak.actors,
            "workers_mb": round(peak.workers_mb, 1),
            "actors_mb": round(peak.actors_mb, 1),
        },
        "parked": parked,
        "dedicated": dedicated,
    }
