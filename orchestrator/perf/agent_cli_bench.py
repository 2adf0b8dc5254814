"""The agent-CLI section of the benchmark (`mailroom bench --only-agent-clis`): how many
live confined agent-CLI episodes this machine holds, and what each costs, against the
bench's tiny actor in the same run.

Each run is one `mailroom launch` as a user starts it, of N LIBERO episodes (up to 50
initial states of each of as many LIBERO-Goal tasks as N needs), on one worker with N
slots, the simulators parked: admission decides how many are live. First the built-in
diagnostic actor, thinking `think_s` per decision (the tiny actor the ratios are
against), then each agent CLI, the real CLI in its sandbox reaching the project's
stand-in provider (`provider_standin/`) through the provider gateway. The stand-in's
scripted model has the agent read each observation and answer it with its own shell
tool, `decisions` times, then stop; it answers every model request after `think_s`,
as a real model would take its time.

While a run goes, this process looks at the launch's processes every second: the
sandboxes (each outermost bubblewrap process and everything below it is one agent's) and
the rest (the launch, its worker, the gateway in it). Figures per run:

- most live at once (sandboxes seen together), and what bound it: the plan (all N), or
  admission (memory, when the machine's available memory came near the margin it keeps;
  otherwise its check of the cores);
- memory per live episode: each actor's memory-cgroup peak (its `actor_stopped`
  record: what admission learns from), its steady use (the median, over every look and
  every live actor, of what its memory cgroup held, and of its processes' resident
  sets), and the worker's resident memory at the most live divided by them;
- CPU per decision: the agents' (their process trees', as last seen: a tree's last
  second is missed) and the evaluator's (the launch's and its workers' own CPU, as last
  seen, the gateway in them included), the evaluator's share of the machine's cores
  over the run, and beside them the launch's CPU as its exit reported it;
- queueing delay p50/p95/p99 (each decision's wait for a simulator, as its worker
  recorded it), episodes per hour, the stand-in's model requests.

Absolute times on this machine move between runs: the ratios against the tiny actor's
run, measured minutes apart in the same bench, are the figures to compare.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mailroom.measures import percentile
from mailroom.orchestrator.actors.memory_cgroup import Hierarchy, actors_memory_of, find_hierarchy
from mailroom.orchestrator.campaign.capacity.memory import DEFAULT_MARGIN, machine_memory
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.perf.process_sampler import below, children_map, cpu_s, program, rss_mb
from mailroom.orchestrator.perf.provider_standin.anthropic_standin import AnthropicStandIn
from mailroom.orchestrator.perf.provider_standin.driver import DriverSettings
from mailroom.orchestrator.perf.provider_standin.http_standin import ScriptedStandIn
from mailroom.orchestrator.perf.provider_standin.openai_standin import OpenAIStandIn
from mailroom.orchestrator.perf.throughput import decision_field
from mailroom.orchestrator.records.event_log import read_log
from mailroom.orchestrator.records.layout import AttemptPaths, RunPaths

SUITE = "libero_goal"
INIT_STATES = 50  # a LIBERO task's initial states
LOOK_S = 1.0
TINY = "scripted_diagnostic"


class AgentCliBenchError(RuntimeError):
    """A launch of the bench did not complete; the end of what it printed says why."""


@dataclass(frozen=True)
class AgentCli:
    """How the bench runs one agent CLI: its profile and its provider's stand-in."""

    profile: str
    standin: type[ScriptedStandIn]
    key_variable: str
    base_url_variable: str
    base_path: str  # what the CLI expects after the origin in its base URL
    model: str


CLIS = {
    "claude_code": AgentCli(
        "claude_code",
        AnthropicStandIn,
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "",
        "standin-claude-model",
    ),
    "codex_cli": AgentCli(
        "codex_cli",
        OpenAIStandIn,
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "/v1",
        "standin-codex-model",
    ),
}


@dataclass(frozen=True)
class AgentCliOptions:
    episodes: int = 100
    think_s: float = 20.0
    decisions: int = 6
    clis: tuple[str, ...] = ("claude_code", "codex_cli")


@dataclass
class _Looks:
    """What the looks at a launch's processes saw."""

    hierarchy: Hierarchy | None  # where the launch's workers make episode cgroups
    live: list[int] = field(default_factory=list)
    actor_rss_mb: list[float] = field(default_factory=list)  # per live sandbox, each look
    actor_cgroup_mb: list[float] = field(default_factory=list)  # per live cgroup, each look
    worker_mb_at_most: float = 0.0
    most_live: int = 0
    tree_cpu_s: dict[int, float] = field(default_factory=dict)  # per sandbox, as last seen
    own_cpu_s: dict[int, float] = field(default_factory=dict)  # per evaluator process
    least_available_mb: float = math.inf


def _look(root: int, looks: _Looks) -> None:
    children = children_map()
    sandboxes: list[int] = []
    evaluator: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if program(pid).endswith("bwrap"):
            sandboxes.append(pid)  # the outermost one: all below it is the agent's
            continue
        evaluator.append(pid)
        todo.extend(children.get(pid, []))
    evaluator_mb = sum(rss_mb(p) for p in evaluator)
    for pid in [root, *evaluator]:
        # Its own time only: what a worker reaped is its actors'.
        looks.own_cpu_s[pid] = max(looks.own_cpu_s.get(pid, 0.0), cpu_s(pid, reaped=False))
    if looks.hierarchy is not None:
        held = actors_memory_of(evaluator, looks.hierarchy)
        looks.actor_cgroup_mb.extend(b / 2**20 for b in held)
    resident = []
    for sandbox in sandboxes:
        tree = [sandbox, *below(children, sandbox)]
        cpu = sum(cpu_s(p) for p in tree)
        looks.tree_cpu_s[sandbox] = max(looks.tree_cpu_s.get(sandbox, 0.0), cpu)
        resident.append(sum(rss_mb(p) for p in tree))
    looks.live.append(len(sandboxes))
    looks.actor_rss_mb.extend(resident)
    if len(sandboxes) >= looks.most_live and sandboxes:
        looks.most_live = len(sandboxes)
        looks.worker_mb_at_most = evaluator_mb
    looks.least_available_mb = min(looks.least_available_mb, machine_memory().available_mb)


def _cases(episodes: int) -> list[Case]:
    return [
        Case(suite=SUITE, task_index=i // INIT_STATES, init_state_index=i % INIT_STATES, seed=7)
        for i in range(episodes)
    ]


def _write_plan(path: Path, episodes: int) -> None:
    from mailroom.orchestrator.catalog.plans import Plan, content_sha256, render_plan
    from mailroom.orchestrator.families.plans import build_plan

    cases = _cases(episodes)
    tasks = sorted({c.task_index for c in cases})
    body = build_plan("task_coverage", suite=SUITE, task_ids=tasks).document()
    body["cases"] = [c.model_dump() for c in cases]
    body["plan_sha256"] = content_sha256(body)
    path.write_bytes(render_plan(Plan.model_validate(body)))


def _launch(
    argv: list[str], env: dict[str, str], out: Path, looks: _Looks
) -> tuple[int, float, float]:
    """Run `mailroom launch`, looking at its processes every second: its exit code, its
    wall time and its whole CPU time (every process it reaped included)."""
    started = time.monotonic()
    with out.open("wb") as sink:
        launch = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, env=env)
    done = threading.Event()

    def look_on() -> None:
        while not done.wait(LOOK_S):
            _look(launch.pid, looks)

    looker = threading.Thread(target=look_on, name="bench-looks", daemon=True)
    looker.start()
    try:
        _, status, usage = os.wait4(launch.pid, 0)
    finally:
        done.set()
        looker.join(timeout=30)
    launch.returncode = os.waitstatus_to_exitcode(status)
    return launch.returncode, time.monotonic() - started, usage.ru_utime + usage.ru_stime


def _median(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def _figures(
    name: str,
    run_dir: Path,
    looks: _Looks,
    wall_s: float,
    launch_cpu_s: float,
    options: AgentCliOptions,
) -> dict[str, Any]:
    results = [json.loads(p.read_text()) for p in sorted(run_dir.glob("episodes/*/result.json"))]
    decisions = sum(int(r["counters"]["policy_calls"]) for r in results)
    peaks = []
    for folder in sorted(RunPaths(run_dir).episodes.iterdir()):
        for stopped in read_log(AttemptPaths(folder).events, kinds=("actor_stopped",)).records:
            peak = (stopped.get("memory") or {}).get("peak_bytes")
            if isinstance(peak, int):
                peaks.append(peak / 2**20)
    agents_cpu = sum(looks.tree_cpu_s.values())
    evaluator_cpu = sum(looks.own_cpu_s.values())
    queue_ms = decision_field(run_dir, "queue_delay_ms")
    total_mb = machine_memory().total_mb
    if looks.most_live >= options.episodes:
        bound = "the plan"
    elif looks.least_available_mb <= total_mb * DEFAULT_MARGIN * 1.5:
        bound = "memory"
    else:
        bound = "admission's check of the cores"
    cores = os.cpu_count() or 1
    return {
        "run": name,
        "episodes": len(results),
        "outcomes": dict(Counter(str(r["outcome"]) for r in results)),
        "errored": sum(1 for r in results if r["outcome"] == "error"),
        "rejected_responses": sum(int(r["counters"]["rejected_responses"]) for r in results),
        "decisions": decisions,
        "wall_s": round(wall_s, 1),
        "episodes_per_hour": round(len(results) * 3600 / wall_s, 1) if wall_s else None,
        "most_live": looks.most_live,
        "bound_by": bound,
        "least_available_mb": round(looks.least_available_mb),
        "actor_cgroup_peak_mb_p50": _median(peaks),
        "actor_cgroup_peak_mb_max": round(max(peaks), 1) if peaks else None,
        "actor_cgroup_mb_p50": _median(looks.actor_cgroup_mb),
        "actor_rss_mb_p50": _median(looks.actor_rss_mb),
        "worker_mb_per_live_episode": (
            round(looks.worker_mb_at_most / looks.most_live, 1) if looks.most_live else None
        ),
        "agent_cpu_s_per_decision": round(agents_cpu / decisions, 3) if decisions else None,
        "evaluator_cpu_s_per_decision": round(evaluator_cpu / decisions, 3) if decisions else None,
        "evaluator_share_of_machine": round(evaluator_cpu / (wall_s * cores), 4),
        # The launch's CPU as its exit reported it (every process it reaped): beside the
        # two figures looked at, what the looks missed or what was never reaped into it.
        "launch_cpu_s": round(launch_cpu_s, 1),
        "looked_cpu_s": round(agents_cpu + evaluator_cpu, 1),
        **{
            f"queue_delay_ms_p{round(q * 100)}": (
                round(percentile(queue_ms, q), 1) if queue_ms else None
            )
            for q in (0.5, 0.95, 0.99)
        },
    }


def _one_run(
    name: str,
    workdir: Path,
    mailbox_base: Path | None,
    options: AgentCliOptions,
    profile_options: list[str],
    env: dict[str, str],
) -> dict[str, Any]:
    run_dir = workdir / name
    plan = workdir / f"{name}-plan.json"
    _write_plan(plan, options.episodes)
    # The mailbox root is part of every path an actor is handed: a random name, made by
    # the launch (the default: a fresh folder in the system's temporary folder).
    where = []
    if mailbox_base is not None:
        where = ["--mailbox-root", str(mailbox_base / secrets.token_hex(8))]
    argv = [
        str(Path(sys.executable).with_name("mailroom")),
        *("launch", str(plan), "--run-dir", str(run_dir), *where),
        *("--workers", "1", "--slots", str(options.episodes), "--record", "minimal"),
        *("--max-policy-calls", str(options.decisions + 2)),
        *("--response-timeout", str(round(options.think_s * 10 + 120))),
        *profile_options,
    ]
    hierarchy = find_hierarchy()
    looks = _Looks(None if isinstance(hierarchy, str) else hierarchy)
    code, wall_s, cpu = _launch(argv, env, workdir / f"{name}-launch.log", looks)
    if code != 0:
        tail = (workdir / f"{name}-launch.log").read_text(errors="replace")[-2000:]
        raise AgentCliBenchError(f"the {name} launch ended with exit {code}: {tail}")
    return _figures(name, run_dir, looks, wall_s, cpu, options)


def agent_cli_bench(
    options: AgentCliOptions,
    workdir: Path,
    mailbox_base: Path | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """The tiny actor's run, then each CLI's; the figures and their ratios."""
    from mailroom.orchestrator.actors.profiles import load_profile

    base_env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    tiny_actor = load_profile(TINY).directory / "actor.py"
    progress(f"{options.episodes} tiny actors")
    tiny = _one_run(
        "tiny",
        workdir,
        mailbox_base,
        options,
        [
            *("--profile", TINY, "--actor"),
            f"{{python}} {tiny_actor} {{endpoint}} --chunks {options.decisions} "
            f"--think {options.think_s}",
        ],
        base_env,
    )
    runs: dict[str, Any] = {"tiny": tiny}
    for name in options.clis:
        cli = CLIS[name]
        progress(f"{options.episodes} live {name} episodes")
        key = f"sk-bench-{secrets.token_hex(16)}"  # a stand-in's, never a provider's
        settings = DriverSettings(act_decisions=options.decisions)
        with cli.standin(settings, think_s=options.think_s, steady_usage=True) as standin:
            env = {
                **base_env,
                cli.key_variable: key,
                cli.base_url_variable: standin.origin + cli.base_path,
            }
            figures = _one_run(
                name,
                workdir,
                mailbox_base,
                options,
                ["--profile", cli.profile, "--model", cli.model],
                env,
            )
            figures["model_requests"] = len(standin.requests())
        figures["over_tiny"] = _ratios(figures, tiny)
        runs[name] = figures
    return {"think_s": options.think_s, "decisions_per_episode": options.decisions, "runs": runs}


def _ratios(cli: dict[str, Any], tiny: dict[str, Any]) -> dict[str, float | None]:
    def ratio(key: str) -> float | None:
        a, b = cli.get(key), tiny.get(key)
        return (
            round(a / b, 2)
            if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b
            else None
        )

    return {
        key: ratio(key)
        for key in (
            "actor_cgroup_peak_mb_p50",
            "evaluator_cpu_s_per_decision",
            "queue_delay_ms_p95",
            "episodes_per_hour",
            "most_live",
        )
    }


def run_agent_cli_bench(
    options: AgentCliOptions,
    mailbox_base: Path | None,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """The section alone (`mailroom bench --only-agent-clis`): its headline figures (per
    CLI, those the targets name) and everything it measured under `details`."""
    with tempfile.TemporaryDirectory(prefix="mailroom-bench-") as tmp:
        figures = agent_cli_bench(options, Path(tmp), mailbox_base, progress)
    headline: dict[str, Any] = {}
    for name in options.clis:
        run = figures["runs"][name]
        for key in HEADLINE_FIGURES:
            headline[f"{name}_{key}"] = run[key]
    return {**headline, "details": {"agent_clis": figures}}


# Per CLI, the figures the bench's headline carries (the targets are on the first three).
HEADLINE_FIGURES = (
    "most_live",
    "evaluator_share_of_machine",
    "queue_delay_ms_p95",
    "actor_cgroup_peak_mb_p50",
    "agent_cpu_s_per_decision",
    "evaluator_cpu_s_per_decision",
)
