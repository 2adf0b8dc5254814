"""`mailroom bench`: the performance figures of this machine, printed from one run."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from mailroom.orchestrator.cli.cells import cell
from mailroom.orchestrator.cli.options import console, json_option
from rich import box
from rich.table import Table

TARGETS = {
    "slow_actor_episodes_per_hour_ratio": (">=", 2.5),
    "mb_per_live_episode": ("<=", 900.0),
    "queue_delay_ms_p95": ("<=", 1000.0),
    "live_episodes_reached": (">=", 16.0),
    "overhead_share_of_cycle": ("<=", 0.04),
    "detect_ms_p50_inotify": ("<=", 2.0),
    "speedup_vs_render_every_control": (">=", 3.0),
    "workers_2_over_1": (">=", 1.7),
    "parked_live_episodes_reached": (">=", 200.0),
    "mb_per_parked_episode": ("<=", 16.0),
    "parked_over_dedicated_episodes_per_hour_ratio": (">=", 4.0),
    "parked_queue_delay_ms_p95": ("<=", 2000.0),
    "flood_added_queue_delay_ms_p95": ("<=", 100.0),
    "gateway_added_ttfb_ms_p95": ("<=", 5.0),
    "claude_code_most_live": (">=", 100.0),
    "claude_code_evaluator_share_of_machine": ("<=", 0.05),
    "claude_code_queue_delay_ms_p95": ("<=", 1000.0),
}

# The headline table's rows, in order; a figure the run did not measure is left out.
HEADLINE = (
    "parked_live_episodes_reached",
    "mb_per_parked_episode",
    "actor_mb_per_episode",
    "parked_over_dedicated_episodes_per_hour_ratio",
    "parked_queue_delay_ms_p95",
    "slow_actor_episodes_per_hour_ratio",
    "short_think_episodes_per_hour_ratio",
    "mb_per_live_episode",
    "queue_delay_ms_p95",
    "live_episodes_reached",
    "overhead_share_of_cycle",
    "overhead_ms_p50",
    "detect_ms_p50_inotify",
    "detect_ms_p50_polling",
    "speedup_vs_render_every_control",
    "workers_2_over_1",
    "peak_rss_mb_per_worker",
    "ray_over_local_wall",
    "ray_overhead_s_per_episode",
    "flood_added_queue_delay_ms_p95",
    "flood_added_rename_to_claim_ms_p95",
    "gateway_live_gates",
    "gateway_added_ttfb_ms_p95",
    "gateway_added_ttfb_ms_p95_1_gate",
    "gateway_added_ttfb_ms_p95_many_gates",
    "gateway_added_total_ms_p95",
    "gateway_added_event_delay_ms_p95",
    "gateway_cpu_ms_per_request_1_gate",
    "gateway_cpu_ms_per_request_many_gates",
)


def _meets(value: float | None, op: str, target: float) -> str:
    if value is None:
        return "n/a"
    ok = value <= target if op == "<=" else value >= target
    return "yes" if ok else "NO"


@click.command()
@click.option(
    "--decisions",
    type=click.IntRange(min=5),
    default=40,
    show_default=True,
    help="Decisions per measured episode.",
)
@click.option("--replan-interval", "k", type=click.IntRange(min=1), default=5, show_default=True)
@click.option(
    "--episodes",
    type=click.IntRange(min=8),
    default=24,
    show_default=True,
    help="Episodes for the 1- and 2-worker throughput runs (four tasks).",
)
@click.option(
    "--mailbox-root",
    "mailbox_base",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory to hold the benchmark's mailboxes, as `launch --mailbox-root` would "
    "(default: the system's temporary directory).",
)
@click.option(
    "--think",
    type=click.FloatRange(min=0),
    default=20.0,
    show_default=True,
    help="Slow-actor section: seconds the actor thinks per decision.",
)
@click.option(
    "--short-think",
    type=click.FloatRange(min=0),
    default=2.0,
    show_default=True,
    help="The same at a short think time, where the cores bind instead of memory.",
)
@click.option(
    "--slow-episodes",
    type=click.IntRange(min=4),
    default=None,
    help="Episodes of each slow-actor run (default: three times what memory holds live).",
)
@click.option("--no-slow", is_flag=True, help="Leave the slow-actor section out (it is long).")
@click.option(
    "--cluster-episodes",
    type=click.IntRange(min=2),
    default=8,
    show_default=True,
    help="Ray section: episodes run on 2 local workers, then on a 2-node Ray cluster.",
)
@click.option(
    "--parked-think",
    type=click.FloatRange(min=0),
    default=40.0,
    show_default=True,
    help="Parked section: seconds the actor thinks per decision.",
)
@click.option("--parked-decisions", type=click.IntRange(min=1), default=10, show_default=True)
@click.option(
    "--parked-episodes",
    type=click.IntRange(min=4),
    default=200,
    show_default=True,
    help="Parked section: episodes of the parked run (the dedicated run has 16).",
)
@click.option("--no-parked", is_flag=True, help="Leave the parked section out (it is long).")
@click.option("--only-parked", is_flag=True, help="Run the parked section alone.")
@click.option(
    "--flood-think",
    type=click.FloatRange(min=0),
    default=20.0,
    show_default=True,
    help="Flood section: seconds the actors think per decision.",
)
@click.option(
    "--flood-episodes",
    type=click.IntRange(min=4),
    default=24,
    show_default=True,
    help="Flood section: episodes of each of its two side-by-side launches.",
)
@click.option("--flood-rounds", type=click.IntRange(min=1), default=2, show_default=True)
@click.option(
    "--only-flood",
    is_flag=True,
    help="Run the flood section alone: two launches side by side, one with an inbox "
    "flooded; what the flood adds to the others' queueing delay.",
)
@click.option(
    "--gateway-pairs",
    type=click.IntRange(min=1),
    default=1500,
    show_default=True,
    help="Gateway section: direct/gatewayed request pairs per answer kind (streamed, JSON) "
    "and setting (one gate, many).",
)
@click.option(
    "--gateway-gates",
    type=click.IntRange(min=2),
    default=120,
    show_default=True,
    help="Gateway section: live gates of the many-gates setting.",
)
@click.option(
    "--gateway-rate",
    type=click.FloatRange(min=0, max=100000),
    default=100.0,
    show_default=True,
    help="Gateway section: request pairs started a second, at random moments (0: back to "
    "back; with more than one in flight, that measures the queue the client's own pace "
    "builds).",
)
@click.option(
    "--gateway-in-flight",
    type=click.IntRange(min=1, max=256),
    default=8,
    show_default=True,
    help="Gateway section: request pairs in flight at most.",
)
@click.option(
    "--gateway-streams",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Gateway section: pairs of streams whose events the upstream spaces apart.",
)
@click.option(
    "--gateway-request-kb",
    type=click.IntRange(min=1, max=16384),
    default=32,
    show_default=True,
    help="Gateway section: each request body's size (KiB).",
)
@click.option(
    "--only-gateway",
    is_flag=True,
    help="Run the provider gateway's section alone: what the gateway adds to a request "
    "against the same request sent straight to the upstream, with one live gate and many.",
)
@click.option(
    "--only-agent-clis",
    is_flag=True,
    help="Run the agent-CLI section alone: N live confined Claude Code and Codex CLI "
    "episodes against the project's stand-in provider, beside the tiny actor's run.",
)
@click.option(
    "--agent-episodes",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Agent-CLI section: episodes of each launch (one worker, as many slots).",
)
@click.option(
    "--agent-think",
    type=click.FloatRange(min=0),
    default=20.0,
    show_default=True,
    help="Agent-CLI section: seconds the stand-in provider takes to answer each model "
    "request (and the tiny actor each decision).",
)
@click.option(
    "--agent-decisions",
    type=click.IntRange(min=1),
    default=6,
    show_default=True,
    help="Agent-CLI section: decisions the stand-in's model has each agent act on.",
)
@click.option(
    "--agent-cli",
    "agent_clis",
    type=click.Choice(["claude_code", "codex_cli"]),
    multiple=True,
    help="Agent-CLI section: the CLIs to run (repeat; default: both).",
)
@click.option("--no-cluster", is_flag=True, help="Leave the Ray executor's section out.")
@click.option("--only-cluster", is_flag=True, help="Run the Ray executor's section alone.")
@json_option("Print one JSON object (headline keys plus details).")
def bench(
    decisions: int,
    k: int,
    episodes: int,
    mailbox_base: Path | None,
    think: float,
    short_think: float,
    slow_episodes: int | None,
    no_slow: bool,
    cluster_episodes: int,
    parked_think: float,
    parked_decisions: int,
    parked_episodes: int,
    no_parked: bool,
    only_parked: bool,
    flood_think: float,
    flood_episodes: int,
    flood_rounds: int,
    only_flood: bool,
    gateway_pairs: int,
    gateway_gates: int,
    gateway_rate: float,
    gateway_in_flight: int,
    gateway_streams: int,
    gateway_request_kb: int,
    only_gateway: bool,
    only_agent_clis: bool,
    agent_episodes: int,
    agent_think: float,
    agent_decisions: int,
    agent_clis: tuple[str, ...],
    no_cluster: bool,
    only_cluster: bool,
    as_json: bool,
) -> None:
    """Measure where each decision's time goes, on the real simulator (takes minutes;
    the slow-actor section, tens of minutes)."""
    if only_agent_clis:
        from mailroom.orchestrator.perf.agent_cli_bench import (
            AgentCliBenchError,
            AgentCliOptions,
            run_agent_cli_bench,
        )

        agents = AgentCliOptions(
            episodes=agent_episodes,
            think_s=agent_think,
            decisions=agent_decisions,
            clis=agent_clis or AgentCliOptions().clis,
        )
        try:
            with console.status("benchmarking: agent CLIs") as status:
                measured = run_agent_cli_bench(
                    agents, mailbox_base, lambda what: status.update(f"benchmarking: {what}")
                )
        except AgentCliBenchError as exc:
            raise click.ClickException(str(exc)) from exc
        if as_json:
            _write_json(measured)
        else:
            _print_agent_clis(measured)
        return
    if only_gateway:
        # Before the simulator's modules are imported: this section needs none of them.
        from mailroom.orchestrator.perf.gateway_bench import (
            GatewayBenchOptions,
            run_gateway_bench,
        )

        gateway = GatewayBenchOptions(
            pairs=gateway_pairs,
            gates=gateway_gates,
            rate=gateway_rate,
            in_flight=gateway_in_flight,
            streams=gateway_streams,
            request_kb=gateway_request_kb,
        )
        _section_alone(
            f"the provider gateway against the upstream direct, 1 and {gateway_gates} gates",
            lambda: run_gateway_bench(gateway),
            _print_gateway,
            as_json,
        )
        return
    from mailroom.orchestrator.perf.decision_costs import (
        ClusterOptions,
        ParkedOptions,
        SlowActorOptions,
        run_bench,
        run_cluster_bench,
        run_flood_bench,
        run_parked_bench,
    )
    from mailroom.orchestrator.perf.flood_isolation import FloodOptions

    if only_flood:
        flood = FloodOptions(think_s=flood_think, episodes=flood_episodes, rounds=flood_rounds)
        _section_alone(
            "two launches side by side, one inbox flooded",
            lambda: run_flood_bench(flood, mailbox_base, k),
            _print_flood,
            as_json,
        )
        return

    parked = None
    if not no_parked:
        parked = ParkedOptions(
            think_s=parked_think, decisions=parked_decisions, parked_episodes=parked_episodes
        )
    if only_parked:
        if parked is None:
            raise click.UsageError("--only-parked and --no-parked exclude each other")
        _section_alone(
            "parked episodes, then a simulator each",
            lambda: run_parked_bench(parked, mailbox_base, k),
            _print_headline,
            as_json,
        )
        return

    cluster = None if no_cluster else ClusterOptions(episodes=cluster_episodes)
    if only_cluster:
        if cluster is None:
            raise click.UsageError("--only-cluster and --no-cluster exclude each other")
        _section_alone(
            "local executor, then a Ray cluster",
            lambda: run_cluster_bench(cluster, mailbox_base, k),
            lambda alone: _print_cluster(alone["details"]["cluster"]),
            as_json,
        )
        return
    slow = None
    if not no_slow:
        slow = SlowActorOptions(think_s=think, short_think_s=short_think, episodes=slow_episodes)
    with console.status("benchmarking") as status:
        figures: dict[str, Any] = run_bench(
            decisions=decisions,
            k=k,
            episodes=episodes,
            progress=lambda what: status.update(f"benchmarking: {what}"),
            mailbox_base=mailbox_base,
            slow=slow,
            cluster=cluster,
            parked=parked,
        )
    if as_json:
        _write_json(figures)
        return
    details = figures["details"]
    _print_phases(details["mailbox"], k)
    _print_headline(figures)
    _print_decision_path(figures)
    _print_throughput(details)
    _print_slow_actors(details["slow_actors"])
    if "cluster" in details:
        _print_cluster(details["cluster"])


def _section_alone(
    what: str,
    run: Callable[[], dict[str, Any]],
    show: Callable[[dict[str, Any]], None],
    as_json: bool,
) -> None:
    """One section of the bench run by itself (`--only-...`), printed as asked."""
    with console.status(f"benchmarking: {what}"):
        alone = run()
    if as_json:
        _write_json(alone)
    else:
        show(alone)


def _write_json(figures: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(figures, indent=2) + "\n")


def _print_phases(mailbox: dict[str, Any], k: int) -> None:
    """Where a decision's time goes, phase by phase, and the orchestrator's share."""
    phases = Table(title=f"per decision at K={k} (instant actor, real mailbox)")
    phases.add_column("phase")
    phases.add_column("p50 ms", justify="right")
    phases.add_column("p95 ms", justify="right")
    for name, row in {**mailbox["phases"], "orchestrator overhead": mailbox["overhead"]}.items():
        phases.add_row(name, cell(row["p50_ms"]), cell(row["p95_ms"]))
    console.print(phases)


def _print_headline(figures: dict[str, Any]) -> None:
    """The headline figures this run measured, each against its target where it has one."""
    headline = Table(title="headline figures")
    headline.add_column("figure")
    headline.add_column("value", justify="right")
    headline.add_column("target")
    headline.add_column("met")
    for key in HEADLINE:
        if key not in figures:
            continue
        op, target = TARGETS.get(key, ("", 0.0))
        headline.add_row(
            key,
            cell(figures[key]),
            f"{op} {target:g}" if op else "",
            _meets(figures[key], op, target) if op else "",
        )
    console.print(headline)


def _print_decision_path(figures: dict[str, Any]) -> None:
    """What one decision's path costs beside its phases: the first observation, the
    actor's start, a response's detection and its parsing."""
    details = figures["details"]
    console.print(
        f"delivered images identical to the naive loop: {details['delivered_images_identical']}; "
        f"first observation: fresh env {details['first_observation']['fresh_env_s']} s, "
        f"reused env {details['first_observation']['reused_env_s']} s"
    )
    starts = details["actor_start"]
    console.print(
        f"actor start to its first line (p50 of {starts['rounds']}): sandboxed "
        f"{starts['sandbox_ms_p50']} ms, unconfined {starts['unconfined_ms_p50']} ms "
        f"(the sandbox adds {starts['sandbox_added_ms_p50']} ms); that is "
        f"{figures['sandbox_start_over_reused_reset']}x the reused simulator's start"
    )
    inotify = details["detection_inotify"]
    console.print(
        f"inotify: rename -> waiter has the name p50 {inotify['p50_ms']} ms, "
        f"-> response claimed, parsed and validated p50 {inotify['judged_p50_ms']} ms"
    )
    cold = details["first_observation"]["parse_one_response_ms"]
    console.print(
        f"parsing one response (p50 ms): warm {cold['warm']}, right after a render "
        f"{cold['after_render']}, after 200 ms idle {cold['after_200ms_idle']}"
    )


def _print_throughput(details: dict[str, Any]) -> None:
    """Episodes per hour on one worker and on two."""
    one, two = details["workers_1"], details["workers_2"]
    console.print(
        f"episodes/hour over whole runs of {one['episodes']} episodes, start-up included: "
        f"1 worker {one['episodes_per_hour']} ({one['wall_s']} s), 2 workers "
        f"{two['episodes_per_hour']} ({two['wall_s']} s); while every worker is busy: "
        f"{one['episodes_per_hour_all_busy']} and {two['episodes_per_hour_all_busy']} "
        f"(ratio {details['workers_2_over_1_all_busy']})"
    )


def _print_slow_actors(slow_actors: dict[str, Any]) -> None:
    """Slow actors served by workers with slots against one process per episode."""
    for label, run in slow_actors.items():
        mx, solo = run["multiplexed"], run["one_per_process"]
        console.print(
            f"actors thinking {run['think_s']:g} s ({label}): {mx['episodes']} episodes; "
            f"2 workers with slots {mx['episodes_per_hour']}/h (at most "
            f"{mx['max_live_episodes']} live, queue p95 {mx['queue_delay_ms_p95']} ms) vs "
            f"{solo['workers']} one-episode processes {solo['episodes_per_hour']}/h: "
            f"{run['episodes_per_hour_ratio']}x; a further simulator "
            f"{mx['further_simulator_mb']} MB, a worker with one episode "
            f"{mx['worker_with_one_episode_mb']} MB"
        )


def _print_cluster(figures: dict[str, Any]) -> None:
    local, on_ray = figures["local"], figures["ray"]
    first = figures["first_publication_ms_p50"]
    console.print(
        f"Ray executor: {figures['episodes']} episodes of {figures['decisions']} decisions "
        f"on {figures['workers']} workers: local {local['wall_s']} s, Ray "
        f"{on_ray['wall_s']} s ({figures['ray_over_local_wall']}x); "
        f"{figures['overhead_s_per_episode']} s more per episode; first observation "
        f"announced to published p50: local {first['local']} ms, Ray {first['ray']} ms"
    )


def _both(flooded: object, quiet: object) -> str:
    """A flooded launch's figure and a quiet one's, in one cell."""
    return f"{cell(flooded)}/{cell(quiet)}"


def _print_flood(alone: dict[str, Any]) -> None:
    """Each round's figures, then the headline (both rounds pooled)."""
    figures = alone["details"]["flood"]
    table = Table(title="the others' waits, ms: flooded launch / quiet launch")
    for column in ("round", "decisions", "queue p50", "queue p95", "to claim p95", "fell back"):
        table.add_column(column, justify="right")
    for number, one in enumerate(figures["rounds"], start=1):
        queue, claim = one["queue_delay"], one["rename_to_claim"]
        table.add_row(
            f"{number} ({cell(one['flooded'])})",
            _both(queue["flooded"]["decisions"], queue["quiet"]["decisions"]),
            _both(queue["flooded"]["p50_ms"], queue["quiet"]["p50_ms"]),
            _both(queue["flooded"]["p95_ms"], queue["quiet"]["p95_ms"]),
            _both(claim["flooded"]["p95_ms"], claim["quiet"]["p95_ms"]),
            _both(one["watchers_fell_back"]["flooded"], one["watchers_fell_back"]["quiet"]),
        )
    console.print(table)
    _print_headline(alone)


def _print_gateway(alone: dict[str, Any]) -> None:
    """Each setting's phases, direct against gatewayed (the gateway's CPU and its wait for
    a CPU beside them: on a shared machine the second explains a tail); the spaced
    streams and the metering check; then the headline."""
    figures = alone["details"]["gateway"]
    options = figures["options"]
    table = Table(
        title=f"ms, direct/gatewayed: {options['rate_pairs_per_s']:g} pairs/s, at most "
        f"{options['in_flight']} in flight, {options['request_bytes'] // 1024} KiB requests",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for column in ("gates", "answer", "TTFB p50", "TTFB p95", "added p95", "total p95"):
        table.add_column(column, justify="right")
    table.add_column("CPU/req", justify="right")
    table.add_column("wait", justify="right")
    settings = [figures[name] for name in ("one_gate", "many_gates")]
    for setting in settings:
        for answer in ("sse", "json", "spaced"):
            phase = setting[answer]
            ttfb, total, cpu = phase["ttfb"], phase["total"], phase["cpu"]
            wait = cpu["gateway_thread_cpu_wait_ms_per_request"]
            table.add_row(
                str(setting["gates"]),
                answer,
                f"{ttfb['direct_ms_p50']:.1f}/{ttfb['gateway_ms_p50']:.1f}",
                f"{ttfb['direct_ms_p95']:.1f}/{ttfb['gateway_ms_p95']:.1f}",
                f"{ttfb['added_ms_p95']:+.1f} {ttfb['ratio_p95']:.1f}x",
                f"{total['direct_ms_p95']:.0f}/{total['gateway_ms_p95']:.0f}",
                f"{cpu['process_cpu_ms_per_request']:.2f}",
                "n/a" if wait is None else f"{wait:.2f}",
            )
    console.print(table)
    for setting in settings:
        delay, gap = setting["spaced"]["event_delay"], setting["spaced"]["event_gap"]
        metering = setting["metering"]
        console.print(
            f"{setting['gates']} gate(s): events {options['gap_ms']:g} ms apart: transit p95 "
            f"{delay['direct_ms_p95']}/{delay['gateway_ms_p95']} ms, gap p95 "
            f"{gap['direct_ms_p95']}/{gap['gateway_ms_p95']} ms; metered "
            f"{metering['metered_requests']} of {metering['gatewayed_requests']} gatewayed "
            f"requests, {metering['gates_metered_exactly']} of {metering['gates']} gates "
            f"exactly, {metering['incomplete_or_failed']} incomplete or failed"
        )
    load = figures["load_average"]
    console.print(
        "CPU/req: this process's CPU (the gateway's) per gatewayed request; wait: its loop "
        "thread's time ready to run but without a CPU, per request (ms); load average "
        f"before {load['before']}, after {load['after']}"
    )
    _print_headline(alone)


# The agent-CLI section's rows: (label, figure), each run's value in a column.
AGENT_CLI_ROWS = (
    ("episodes", "episodes"),
    ("decisions", "decisions"),
    ("episodes ended in error", "errored"),
    ("rejected responses", "rejected_responses"),
    ("most live at once", "most_live"),
    ("bound by", "bound_by"),
    ("actor cgroup peak MiB p50", "actor_cgroup_peak_mb_p50"),
    ("actor cgroup peak MiB max", "actor_cgroup_peak_mb_max"),
    ("actor cgroup MiB p50 (steady)", "actor_cgroup_mb_p50"),
    ("actor resident MiB p50", "actor_rss_mb_p50"),
    ("worker MiB per live episode", "worker_mb_per_live_episode"),
    ("agent CPU s per decision", "agent_cpu_s_per_decision"),
    ("evaluator CPU s per decision", "evaluator_cpu_s_per_decision"),
    ("evaluator share of machine", "evaluator_share_of_machine"),
    ("queueing delay ms p50", "queue_delay_ms_p50"),
    ("queueing delay ms p95", "queue_delay_ms_p95"),
    ("queueing delay ms p99", "queue_delay_ms_p99"),
    ("episodes per hour", "episodes_per_hour"),
    ("model requests", "model_requests"),
)


def _print_agent_clis(figures: dict[str, Any]) -> None:
    """Each run's figures side by side, the CLIs' ratios to the tiny actor's, then the
    headline against its targets."""
    section = figures["details"]["agent_clis"]
    runs = section["runs"]
    table = Table(
        title=f"live agent-CLI episodes (model answers after {section['think_s']:g} s; "
        f"{section['decisions_per_episode']} decisions each)",
        box=box.SIMPLE,
    )
    table.add_column("figure")
    for name in runs:
        table.add_column(name, justify="right")
    for label, key in AGENT_CLI_ROWS:
        table.add_row(label, *(cell(run.get(key)) for run in runs.values()))
    console.print(table)
    ratios = Table(title="against the tiny actor (x)", box=box.SIMPLE)
    ratios.add_column("figure")
    clis = [name for name in runs if name != "tiny"]
    for name in clis:
        ratios.add_column(name, justify="right")
    for key in runs[clis[0]]["over_tiny"] if clis else ():
        ratios.add_row(key, *(cell(runs[name]["over_tiny"][key]) for name in clis))
    console.print(ratios)
    headline = Table(title="targets")
    headline.add_column("figure")
    headline.add_column("value", justify="right")
    headline.add_column("target")
    headline.add_column("met")
    for key, (op, target) in TARGETS.items():
        if key in figures:
            headline.add_row(
                key, cell(figures[key]), f"{op} {target:g}", _meets(figures[key], op, target)
            )
    console.print(headline)
