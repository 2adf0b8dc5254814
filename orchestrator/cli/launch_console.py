"""What `launch` and `resume` print on stderr while they run: the capacity decided, the
cluster's placement, launch messages for external actors, workers' events and progress."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.campaign.capacity.actor_memory import ActorShare
from mailroom.orchestrator.campaign.capacity.decide import CapacityDecision
from mailroom.orchestrator.campaign.capacity.kernel import ACTOR_PROCESSES_PER_EPISODE, actor_tasks
from mailroom.orchestrator.campaign.capacity.memory import MemoryPolicy
from mailroom.orchestrator.campaign.capacity.placement import SLOT_RESOURCE
from mailroom.orchestrator.cli.launch_stop import stopping_words
from mailroom.orchestrator.cli.options import console
from mailroom.orchestrator.records.layout import RunPaths, attempt_id_of
from mailroom.orchestrator.sim.parked import Holding
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress


def print_launch_message(out: Console, text: str, private_copy: Path) -> None:
    """The launch message exactly as rendered: no wrapping, borders or markup, between
    two marker lines a coordinator does not copy."""
    out.print(
        f"----- launch message: hand exactly the lines below to a fresh actor "
        f"(private copy: {private_copy}) -----",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    out.print(text, markup=False, highlight=False, soft_wrap=True, emoji=False, end="")
    if not text.endswith("\n"):
        out.print("", markup=False)
    out.print("----- end of launch message -----", markup=False, highlight=False)


# What a cluster executor says of its workers (`cluster/executor.py`).
WORKER_EVENTS = (
    "worker_ready",
    "worker_refused",
    "worker_lost",
    "worker_failed",
    "evidence_refused",
)


def print_worker_event(out: Console, kind: str, payload: tuple[Any, ...]) -> None:
    if kind == "worker_ready":
        place = payload[0]
        out.print(
            f"worker {place.index} ready on {escape(place.hostname)} "
            f"(Ray node {place.node_id[:12]}, pid {place.pid})",
            highlight=False,
        )
    elif kind == "evidence_refused":
        out.print(
            f"[red]evidence refused:[/red] {escape(str(payload[0]))}: {escape(str(payload[1]))}",
            highlight=False,
        )
    else:
        words = {"worker_refused": "did not start", "worker_lost": "was lost"}
        said = words.get(kind, "failed")
        out.print(
            f"[yellow]worker {payload[0]} {said}:[/yellow] {escape(str(payload[1]))}",
            highlight=False,
        )


def progress_listener(progress: Progress, task: Any, counts: dict[str, int], run_dir: Path) -> Any:
    def listen(kind: str, payload: tuple[Any, ...]) -> None:
        if kind in WORKER_EVENTS:
            print_worker_event(progress.console, kind, payload)
            return
        if kind == "stopping":
            progress.console.print(stopping_words(str(payload[0])), highlight=False)
            return
        if kind == "launch_message":
            case_id, attempt, text = payload[0], payload[1], payload[2]
            copy = RunPaths(run_dir).attempt(attempt_id_of(case_id, attempt)).launch_message
            print_launch_message(progress.console, text, copy)
            return
        if kind == "finished":
            counts[str(payload[2])] += 1
        elif kind == "crashed":
            counts["error"] += 1
        else:
            return
        progress.update(
            task,
            advance=1,
            description=(
                f"success {counts['success']}  failure {counts['failure']}  "
                f"errored {counts['error']}"
            ),
        )

    return listen


def print_memory_not_enforced(problem: str) -> None:
    console.print(
        f"[yellow]memory not enforced:[/yellow] {escape(problem)}; actors run without a "
        "kernel memory ceiling, as each actor_started event records "
        "(--require-memory-limit refuses instead)",
        highlight=False,
    )


def print_refusal(label: str, message: str) -> None:
    console.print(f"[red]{label}:[/red] {escape(message)}", highlight=False)


def print_cluster(ray_address: str, workers: int, decision: CapacityDecision) -> None:
    """Before anything starts on a cluster: its nodes, and the live episodes placed."""
    slots = decision.slots
    declared = sum(n.slots for n in decision.nodes)
    console.print(
        f"Ray cluster at {escape(ray_address)}: {len(decision.nodes)} node(s), {declared:g} "
        f"{SLOT_RESOURCE}; live episodes: at most {workers * slots} ({workers} worker(s) x "
        f"{slots} slot(s)), each worker on one node",
        highlight=False,
    )


def print_actor_share(limits: ActorLimits) -> None:
    """What each live actor is expected to hold and may start, and why: a worker reserves
    the one, the kernel check counts the other."""
    share = ActorShare.declared_in(limits)
    expected, why = share.expected()
    reserved = "reserved for each live actor until it holds it"
    if not share.known:
        reserved = "asked of each new actor"
    tasks = actor_tasks(limits)
    counted = (
        f"counted as {tasks} processes and threads (limits.processes)"
        if tasks > ACTOR_PROCESSES_PER_EPISODE
        else "counted as its one process (the profile declares no limits.processes)"
    )
    console.print(
        f"each actor: expected to hold {expected:.0f} MiB at its peak ({why}), {reserved}; "
        f"learned from the actors' memory cgroups as episodes end; {counted}",
        highlight=False,
    )


def print_capacity(
    policy: MemoryPolicy, workers: int, holding: Holding, decision: CapacityDecision
) -> None:
    """Before anything starts on this machine: the slots and how many live episodes
    memory can hold."""
    slots = decision.slots
    if decision.choice is not None:
        console.print(decision.choice.reason, highlight=False)
    if holding == "parked" and slots > 1:
        console.print(
            f"live episodes: at most {workers * slots} ({workers} worker(s) x {slots} "
            f"slot(s)), parked on a serving simulator and a starter per task; each worker "
            f"admits another while its serving thread keeps up and {policy.margin:.0%} of "
            "memory stays free",
            highlight=False,
        )
        return
    fits = decision.estimate
    if fits is None:
        unknown = escape(str(decision.memory_unknown))
        console.print(f"[yellow]memory unknown:[/yellow] {unknown}; one live episode")
        return
    cap = "" if policy.max_memory_mb is None else f", capped at {policy.max_memory_mb:.0f} MiB"
    console.print(
        f"live episodes: at most {workers * slots} ({workers} worker(s) x {slots} slot(s)); "
        f"memory holds about {fits.live_episodes} ({fits.usable_mb / 1024:.1f} GiB usable, "
        f"keeping {policy.margin:.0%} free{cap}; estimated {fits.first_mb / 1024:.1f} GiB "
        f"for a worker's first simulator, {fits.further_mb / 1024:.1f} GiB for each further)"
    )
