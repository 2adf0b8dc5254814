"""The Ray executor's cost per episode, against the local executor, in one run.

The same episodes (sandboxed diagnostic actors, the real simulator and mailbox) run
twice, one after the other: in W local worker processes, then in W Ray workers of one
slot on a Ray cluster started here (a head and W-1 more node processes, one slot each,
so each worker is on a node of its own). What differs is the executor: Ray's actor
start, the event lines mirrored to the driver, the wait for the driver's record before
each attempt's first observation, and each finished attempt's evidence sent back.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from mailroom.orchestrator.perf.throughput import cases_over_tasks, throughput_run
from mailroom.orchestrator.records.event_log import read_log
from mailroom.orchestrator.records.layout import AttemptPaths, RunPaths


def _first_publication_ms(run_dir: Path) -> list[float]:
    """Per attempt: from the announcement of its first observation to its publication
    (on a cluster, this holds the wait for the driver's record)."""
    gaps: list[float] = []
    for folder in sorted(RunPaths(run_dir).episodes.iterdir()):
        announced = published = None
        for event in read_log(AttemptPaths(folder).events).records:
            if event["event"] == "first_observation_publishing" and announced is None:
                announced = float(event["t"])
            elif event["event"] == "observation_published" and published is None:
                published = float(event["t"])
        if announced is not None and published is not None:
            gaps.append((published - announced) * 1000)
    return gaps


def _median_ms(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def cluster_comparison(
    *,
    episodes: int,
    workers: int,
    decisions: int,
    k: int,
    think_s: float,
    workdir: Path,
    mailbox_root: Path,
) -> dict[str, Any]:
    from mailroom.orchestrator.cluster.executor import RayExecutor
    from mailroom.orchestrator.cluster.local_cluster import local_cluster

    cases = cases_over_tasks(episodes)
    common: dict[str, Any] = {
        "cases": cases,
        "workers": workers,
        "slots": 1,
        "think_s": think_s,
        "decisions": decisions,
        "k": k,
    }
    local = throughput_run(**common, run_dir=workdir / "local", mailbox_root=mailbox_root / "local")
    with local_cluster(workers, 1) as cluster:
        on_ray = throughput_run(
            **common,
            run_dir=workdir / "ray",
            mailbox_root=mailbox_root / "ray",
            executor=RayExecutor(str(cluster.address)),
        )
    extra_s = on_ray["wall_s"] - local["wall_s"]
    return {
        "episodes": len(cases),
        "workers": workers,
        "decisions": decisions,
        "local": local,
        "ray": on_ray,
        "ray_over_local_wall": round(on_ray["wall_s"] / local["wall_s"], 3),
        # Each worker runs its share of the episodes one after the other.
        "overhead_s_per_episode": round(extra_s * workers / len(cases), 2),
        "first_publication_ms_p50": {
            "local": _median_ms(_first_publication_ms(workdir / "local")),
            "ray": _median_ms(_first_publication_ms(workdir / "ray")),
        },
    }
