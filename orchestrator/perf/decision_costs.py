"""`mailroom bench`: where each decision's time goes, measured on the real simulator.

Run by hand, never as a timed test. Every figure comes from one run of this module on
this machine; ratios compare paths measured in that same run.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from mailroom.benchmarks.libero.adapter import (
    CAMERAS,
    SETTLING_ACTION,
    SETTLING_CONTROLS,
    LiberoAdapter,
)
from mailroom.measures import CLOCK
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.packages.headless import simulator_chatter_to_stderr
from mailroom.orchestrator.perf.detection import BENCH_ACTION, act_response, milliseconds
from mailroom.orchestrator.perf.flood_isolation import FloodOptions
from mailroom.orchestrator.records.event_log import read_log
from mailroom.orchestrator.records.layout import RunPaths
from mailroom.orchestrator.transport.png import decode_png, encode_png

BENCH_CASE = Case(suite="libero_10", task_index=0, init_state_index=0, seed=20260907)


@dataclass(frozen=True)
class SlowActorOptions:
    """The slow-actor section: actors thinking `think_s` (and `short_think_s`, where the
    cores bind instead of memory) per decision, `decisions` each."""

    think_s: float = 20.0
    short_think_s: float = 2.0
    decisions: int = 6
    episodes: int | None = None  # None: three times the live episodes memory holds
    short_episodes: int | None = 24


@dataclass(frozen=True)
class ClusterOptions:
    """The Ray executor's section: `episodes` of `decisions` each, on `workers` workers
    locally, then on a Ray cluster of as many one-slot nodes started here."""

    episodes: int = 8
    workers: int = 2
    decisions: int = 10
    think_s: float = 0.0


@dataclass(frozen=True)
class ParkedOptions:
    """The parked section (`perf/parked_bench.py`): actors thinking `think_s` per
    decision, `decisions` each; `parked_episodes` parked, then `dedicated_episodes` on
    a simulator each, under one memory cap."""

    think_s: float = 40.0
    decisions: int = 10
    parked_episodes: int = 200
    dedicated_episodes: int = 16


def parked_bench(options: ParkedOptions, work: Path, mailboxes: Path, k: int = 5) -> dict[str, Any]:
    from mailroom.orchestrator.perf.parked_bench import parked_comparison

    return parked_comparison(
        workdir=work / "parked",
        mailbox_root=mailboxes / "parked",
        k=k,
        think_s=options.think_s,
        decisions=options.decisions,
        parked_episodes=options.parked_episodes,
        dedicated_episodes=options.dedicated_episodes,
    )


def run_parked_bench(options: ParkedOptions, mailbox_base: Path | None, k: int) -> dict[str, Any]:
    """The parked section alone (`mailroom bench --only-parked`)."""
    with (
        tempfile.TemporaryDirectory(prefix="mailroom-bench-") as tmp,
        tempfile.TemporaryDirectory(prefix="mailroom-bench-mb-", dir=mailbox_base) as mb,
    ):
        os.chmod(mb, 0o711)  # a sandbox's own user must reach its endpoint
        figures = parked_bench(options, Path(tmp), Path(mb), k)
    return {**_parked_headline(figures), "details": {"parked": figures}}


def run_flood_bench(options: FloodOptions, mailbox_base: Path | None, k: int) -> dict[str, Any]:
    """The flood section alone (`mailroom bench --only-flood`, `perf/flood_isolation.py`)."""
    from mailroom.orchestrator.perf.flood_isolation import flood_comparison

    with (
        tempfile.TemporaryDirectory(prefix="mailroom-bench-") as tmp,
        tempfile.TemporaryDirectory(prefix="mailroom-bench-mb-", dir=mailbox_base) as mb,
    ):
        os.chmod(mb, 0o711)
        figures = flood_comparison(
            workdir=Path(tmp) / "flood", mailbox_root=Path(mb), k=k, options=options
        )
    return {
        "flood_added_queue_delay_ms_p95": figures["flood_added_queue_delay_ms_p95"],
        "flood_added_rename_to_claim_ms_p95": figures["flood_added_rename_to_claim_ms_p95"],
        "details": {"flood": figures},
    }


PARKED_HEADLINE = (
    "parked_live_episodes_reached",
    "mb_per_parked_episode",
    "actor_mb_per_episode",
    "parked_over_dedicated_episodes_per_hour_ratio",
    "parked_queue_delay_ms_p95",
)


def _parked_headline(figures: dict[str, Any]) -> dict[str, Any]:
    return {key: figures[key] for key in PARKED_HEADLINE}


def cluster_bench(
    options: ClusterOptions, work: Path, mailboxes: Path, k: int = 5
) -> dict[str, Any]:
    from mailroom.orchestrator.perf.cluster_overhead import cluster_comparison

    return cluster_comparison(
        episodes=options.episodes,
        workers=options.workers,
        decisions=options.decisions,
        k=k,
        think_s=options.think_s,
        workdir=work / "cluster",
        mailbox_root=mailboxes / "cluster",
    )


def run_cluster_bench(
    options: ClusterOptions, mailbox_base: Path | None = None, k: int = 5
) -> dict[str, Any]:
    """The cluster section alone (`mailroom bench --only-cluster`)."""
    with (
        tempfile.TemporaryDirectory(prefix="mailroom-bench-") as tmp,
        tempfile.TemporaryDirectory(prefix="mailroom-bench-mb-", dir=mailbox_base) as mb,
    ):
        os.chmod(mb, 0o711)
        figures = cluster_bench(options, Path(tmp), Path(mb), k)
    return _cluster_headline(figures)


def _cluster_headline(figures: dict[str, Any]) -> dict[str, Any]:
    return {
        "ray_over_local_wall": figures["ray_over_local_wall"],
        "ray_overhead_s_per_episode": figures["overhead_s_per_episode"],
        "details": {"cluster": figures},
    }


def mailbox_decisions(decisions: int, k: int, workdir: Path, mailbox_root: Path) -> dict[str, Any]:
    """The real orchestrator path with an instant actor process: phases per decision."""
    from mailroom.orchestrator.actors.confinement import ConfinementSettings
    from mailroom.orchestrator.actors.launcher import process_launcher
    from mailroom.orchestrator.episode.blinded import run_blinded_episode
    from mailroom.orchestrator.perf.instant_actor import read_timings

    adapter = LiberoAdapter(control_cap=decisions * k)
    settings = RunSettings(max_policy_calls=decisions, replan_interval=k, response_timeout_s=60)
    actor = [sys.executable, "-m", "mailroom.orchestrator.perf.instant_actor", "{endpoint}", str(k)]
    CLOCK.reset(enabled=True)
    try:
        started = time.perf_counter()
        result = run_blinded_episode(
            BENCH_CASE,
            attempt=1,
            settings=settings,
            adapter=adapter,
            run_dir=workdir / "run",
            mailbox_root=mailbox_root,
            # The instant actor imports the project, so it runs unconfined: this measures
            # the orchestrator's own path (the sandbox's start-up is measured apart).
            launch_actor=process_launcher(actor, confinement=ConfinementSettings(mode="none")),
            record="minimal",
        )
        elapsed = time.perf_counter() - started
    finally:
        adapter.close()
    cycles = CLOCK.cycles
    samples = dict(CLOCK.samples)
    CLOCK.reset(enabled=False)
    if result.outcome == "error":
        raise RuntimeError(f"the benchmark episode failed: {result.errors}")
    endpoint = next(mailbox_root.iterdir())
    detected = samples.get("response_detected_at", [])
    written = read_timings(endpoint)
    detection = [d - written[i + 1] for i, d in enumerate(detected) if i + 1 in written]
    claims = samples.get("claim_parse", [])
    phase = {
        "physics": [c.get("control_step", 0.0) - c.get("render", 0.0) for c in cycles],
        "rendering": [c.get("render", 0.0) for c in cycles],
        "image_encoding": [c.get("encode", 0.0) for c in cycles],
        "publishing": [c.get("publish", 0.0) for c in cycles],
        "observation_document": [c.get("observation_document", 0.0) for c in cycles],
        "after_publication": [c.get("after_publication", 0.0) for c in cycles],
        "frame_copies": [c.get("capture", 0.0) for c in cycles],
        "claim_parse_validate": claims,
        "response_detection": detection,
    }
    # From the moment the watcher saw response n to the publication of the observation
    # that follows it, minus the simulator's own time: everything the orchestrator does
    # in between (claim, parse, validation, records, encoding, publication).
    overhead = [
        c["published_at"] - detected_at - c.get("control_step", 0.0)
        for c, detected_at in zip(cycles, detected, strict=False)
    ]
    events = RunPaths(workdir / "run").attempt(result.attempt_id).events
    published = read_log(events, kinds=("observation_published", "closed_published"))
    stamps = [e["t"] for e in published.records]
    loop_s = stamps[-1] - stamps[0]
    return {
        "decisions": result.counters.policy_calls,
        "controls": result.counters.executed_controls,
        "policy_loop_s": round(loop_s, 3),
        "episode_wall_s": round(elapsed, 3),
        "decisions_per_s": round(result.counters.policy_calls / loop_s, 3),
        "phases": {name: milliseconds(values) for name, values in phase.items()},
        "overhead": milliseconds(overhead),
        "outbox": str(endpoint / "outbox"),
    }


def naive_decisions(decisions: int, k: int) -> dict[str, Any]:
    """What common LIBERO evaluators do: both cameras rendered at every control."""
    with simulator_chatter_to_stderr():
        from libero.libero.envs import OffScreenRenderEnv
        from mailroom.benchmarks.libero.adapter import load_init_states, resolve_task

        identity = resolve_task(BENCH_CASE.suite, BENCH_CASE.task_index)
        env = OffScreenRenderEnv(
            bddl_file_name=str(identity.bddl_path), camera_heights=256, camera_widths=256
        )
        try:
            env.seed(BENCH_CASE.seed)
            env.reset()
            env.set_init_state(load_init_states(identity)[BENCH_CASE.init_state_index])
            for _ in range(SETTLING_CONTROLS):
                obs, *_ = env.step(np.array(SETTLING_ACTION))
            delivered = [
                {
                    c: encode_png(np.ascontiguousarray(obs[f"{c}_image"][::-1, ::-1]))
                    for c in CAMERAS
                }
            ]
            started = time.perf_counter()
            for _ in range(decisions):
                for _ in range(k):
                    obs, *_ = env.step(np.array(BENCH_ACTION))
                delivered.append(
                    {
                        c: encode_png(np.ascontiguousarray(obs[f"{c}_image"][::-1, ::-1]))
                        for c in CAMERAS
                    }
                )
            elapsed = time.perf_counter() - started
        finally:
            env.close()
    return {"decisions_per_s": round(decisions / elapsed, 3), "delivered": delivered}


def first_observation_latency() -> dict[str, Any]:
    """Seed, reset, released state, settling and the first frame: on a freshly built env,
    then on the same env again (the first reuse compiles the scene; later ones do not)."""
    from mailroom.benchmarks.libero.adapter import resolve_task

    identity = resolve_task(BENCH_CASE.suite, BENCH_CASE.task_index)
    adapter = LiberoAdapter(control_cap=200)  # room for `cold_code`
    starts: list[float] = []
    try:
        for init_state in range(4):
            started = time.perf_counter()
            adapter.start_episode(identity, init_state, BENCH_CASE.seed)
            starts.append(time.perf_counter() - started)
        cold = cold_code(adapter)
    finally:
        adapter.close()
    return {
        "fresh_env_s": round(starts[0], 3),
        "reused_env_s": round(sorted(starts[1:])[1], 3),
        "each_start_s": [round(x, 3) for x in starts],
        "parse_one_response_ms": cold,
    }


def actor_start(rounds: int, mailbox_root: Path) -> dict[str, Any]:
    """From starting an actor to its first line of code, in the sandbox and unconfined,
    alternating round by round: what confinement adds to each episode's start."""
    from mailroom.mailbox.endpoint import create_endpoint
    from mailroom.orchestrator.actors.confinement import ConfinementSettings
    from mailroom.orchestrator.actors.launcher import process_launcher

    # It says so in its inbox: its scratch/ is its own filesystem, unseen from here.
    command = [
        "{python}",
        "-c",
        "import sys; open(sys.argv[1] + '/inbox/started', 'w')",
        "{endpoint}",
    ]
    launchers = {
        mode: process_launcher(
            command, confinement=ConfinementSettings(mode=mode), mailbox_root=mailbox_root
        )
        for mode in ("sandbox", "none")
    }
    times: dict[str, list[float]] = {mode: [] for mode in launchers}
    for _ in range(rounds):
        for mode, launcher in launchers.items():
            identity = launcher.identity()
            endpoint = create_endpoint(mailbox_root, actor_gid=identity.gid)
            started = time.perf_counter()
            actor = launcher.start(endpoint, "", identity, None)
            while not (endpoint.inbox / "started").exists():
                if not actor.alive() and not (endpoint.inbox / "started").exists():
                    raise RuntimeError(f"the {mode} actor ended before it started")
                time.sleep(0.0005)
            times[mode].append(time.perf_counter() - started)
            actor.stop(exit_window_s=5.0)
            endpoint.held.close()
    median = {mode: statistics.median(values) * 1000 for mode, values in times.items()}
    return {
        "rounds": rounds,
        "sandbox_ms_p50": round(median["sandbox"], 1),
        "unconfined_ms_p50": round(median["none"], 1),
        "sandbox_added_ms_p50": round(median["sandbox"] - median["none"], 1),
    }


def cold_code(adapter: LiberoAdapter, rounds: int = 20) -> dict[str, float | None]:
    """The same few lines of the orchestrator's own work (parsing and validating one
    response) timed warm, right after a chunk with a render, and after the idle wait a
    thinking actor causes: how much of the per-decision overhead is cold caches."""
    import secrets

    from mailroom.mailbox.parser import ActionLimits, parse_response

    request_id = secrets.token_hex(16)
    body = act_response(request_id, 5)
    limits = ActionLimits(max_chunk=5)

    def parse() -> float:
        started = time.perf_counter()
        parse_response(body, expected_request_id=request_id, limits=limits)
        return time.perf_counter() - started

    warm, after_render, after_idle = [], [], []
    for _ in range(rounds):
        for i in range(5):
            adapter.step(SETTLING_ACTION, observe=i == 4)
        after_render.append(parse())
        warm.append(parse())
        time.sleep(0.2)
        after_idle.append(parse())
    return {
        "warm": milliseconds(warm)["p50_ms"],
        "after_render": milliseconds(after_render)["p50_ms"],
        "after_200ms_idle": milliseconds(after_idle)["p50_ms"],
    }


def episodes_per_hour(
    workers: int, episodes: int, workdir: Path, mailbox_root: Path
) -> dict[str, Any]:
    """Canonical-style work: four tasks, several released initial states each, an actor
    that answers at once (D=10, K=5). Each worker reuses its simulator across the
    episodes of a task and builds one per task it takes, so 1 and 2 workers build the
    same number of simulators in all."""
    from mailroom.orchestrator.perf.throughput import cases_over_tasks, throughput_run

    per_task = max(1, episodes // 4)
    figures: dict[str, Any] = throughput_run(
        cases=cases_over_tasks(4 * per_task),
        workers=workers,
        slots=1,
        think_s=0.0,
        decisions=10,
        k=5,
        run_dir=workdir / f"workers-{workers}",
        mailbox_root=mailbox_root,
    )
    return figures


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 3)


def overhead_share(mailbox: dict[str, Any]) -> float | None:
    """The orchestrator's own overhead per decision over the simulator's physics plus
    rendering (medians of the same decisions)."""
    phases = mailbox["phases"]
    cycle = (phases["physics"]["p50_ms"] or 0.0) + (phases["rendering"]["p50_ms"] or 0.0)
    overhead = mailbox["overhead"]["p50_ms"]
    return None if overhead is None or cycle <= 0 else round(overhead / cycle, 4)


def run_bench(
    decisions: int = 40,
    k: int = 5,
    episodes: int = 24,
    progress: Callable[[str], None] = lambda _: None,
    mailbox_base: Path | None = None,
    slow: SlowActorOptions | None = None,
    cluster: ClusterOptions | None = None,
    parked: ParkedOptions | None = None,
) -> dict[str, Any]:
    """`mailbox_base`: where the mailbox roots go (as `--mailbox-root` would put them);
    the system's temporary directory by default, like `mailroom launch`. `slow`: the
    slow-actor section's settings, `cluster` the Ray executor's (None: left out)."""
    from mailroom.orchestrator.perf.detection import measure_detection
    from mailroom.orchestrator.perf.throughput import slow_actor_comparison

    with (
        tempfile.TemporaryDirectory(prefix="mailroom-bench-") as tmp,
        tempfile.TemporaryDirectory(prefix="mailroom-bench-mb-", dir=mailbox_base) as mb,
    ):
        work, mailboxes = Path(tmp), Path(mb)
        os.chmod(mailboxes, 0o711)  # a sandbox's own user must reach its endpoint
        progress("decisions through the real mailbox")
        mailbox = mailbox_decisions(decisions, k, work / "mailbox", mailboxes / "decisions")
        progress("naive loop rendering every control")
        naive = naive_decisions(decisions, k)
        outbox = Path(mailbox.pop("outbox"))
        identical = all(
            np.array_equal(
                decode_png((outbox / f"obs-{i + 1}-{c}.png").read_bytes()), decode_png(d[c])
            )
            for i, d in enumerate(naive.pop("delivered")[:decisions])
            for c in CAMERAS
        )
        progress("first-observation latency")
        first = first_observation_latency()
        progress("actor start-up, sandboxed and unconfined")
        starts = actor_start(20, mailboxes / "starts")
        progress("1 worker")
        one = episodes_per_hour(1, episodes, work / "w1", mailboxes / "w1")
        progress("2 workers")
        two = episodes_per_hour(2, episodes, work / "w2", mailboxes / "w2")
        progress("watcher detection latency")
        inotify = measure_detection("inotify", 200, base=mailboxes)
        polling = measure_detection("polling", 200, base=mailboxes)
        slow_figures: dict[str, Any] = {}
        if slow is not None:
            for label, think in (("slow", slow.think_s), ("short", slow.short_think_s)):
                progress(f"actors thinking {think:g} s: live episodes, then one per process")
                slow_figures[label] = slow_actor_comparison(
                    think_s=think,
                    decisions=slow.decisions,
                    k=k,
                    episodes=slow.episodes if label == "slow" else slow.short_episodes,
                    workdir=work / "slow",
                    mailbox_root=mailboxes / "slow",
                    label=label,
                )
        parked_figures: dict[str, Any] = {}
        if parked is not None:
            progress(f"actors thinking {parked.think_s:g} s: parked, then a simulator each")
            parked_figures = parked_bench(parked, work, mailboxes, k)
        cluster_figures: dict[str, Any] = {}
        if cluster is not None:
            progress("the same episodes on the local executor, then on a Ray cluster")
            cluster_figures = _cluster_headline(cluster_bench(cluster, work, mailboxes, k))
    headline_slow: dict[str, Any] = {}
    if slow_figures:
        mx = slow_figures["slow"]["multiplexed"]
        headline_slow = {
            "slow_actor_episodes_per_hour_ratio": slow_figures["slow"]["episodes_per_hour_ratio"],
            "short_think_episodes_per_hour_ratio": slow_figures["short"]["episodes_per_hour_ratio"],
            "mb_per_live_episode": mx["further_simulator_mb"],
            "queue_delay_ms_p95": mx["queue_delay_ms_p95"],
            "live_episodes_reached": mx["max_live_episodes"],
        }
    cluster_details = cluster_figures.pop("details", {})
    return {
        **headline_slow,
        **(_parked_headline(parked_figures) if parked_figures else {}),
        **cluster_figures,
        "overhead_share_of_cycle": overhead_share(mailbox),
        "overhead_ms_p50": mailbox["overhead"]["p50_ms"],
        "detect_ms_p50_inotify": inotify["p50_ms"],
        "detect_ms_p50_polling": polling["p50_ms"],
        "speedup_vs_render_every_control": round(
            mailbox["decisions_per_s"] / naive["decisions_per_s"], 3
        ),
        "workers_2_over_1": _ratio(two["episodes_per_hour"], one["episodes_per_hour"]),
        "peak_rss_mb_per_worker": max(
            one["peak_rss_mb_per_worker"] or 0.0, two["peak_rss_mb_per_worker"] or 0.0
        ),
        # Confinement's share of an episode's start, next to the simulator's own start.
        "sandbox_start_ms_p50": starts["sandbox_ms_p50"],
        "sandbox_start_over_reused_reset": _ratio(
            starts["sandbox_ms_p50"] / 1000, first["reused_env_s"]
        ),
        "details": {
            "actor_start": starts,
            "k": k,
            "mailbox": mailbox,
            "naive_render_every_control": naive,
            "delivered_images_identical": identical,
            "first_observation": first,
            "workers_1": one,
            "workers_2": two,
            # Leaves out start-up and the tail, but not the simulator builds of later
            # tasks, which fall unevenly into the windows: indicative only.
            "workers_2_over_1_all_busy": _ratio(
                two["episodes_per_hour_all_busy"], one["episodes_per_hour_all_busy"]
            ),
            "detection_inotify": inotify,
            "detection_polling": polling,
            "slow_actors": slow_figures,
            "parked": parked_figures,
            **cluster_details,
            "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
            "mailbox_base": str(Path(mb).parent),
        },
    }
