"""The options `launch` and `resume` take, and what they are read into: the run's
settings, memory sizes and the memory policy, slots, simulators, executor, price table."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import click
from mailroom.mailbox.publish import OutboxDurability
from mailroom.mailbox.watcher import WatchMode
from mailroom.orchestrator.campaign.capacity.memory import MemoryPolicy
from mailroom.orchestrator.cli.options import watch_mode_option
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.gateway.server import PRICE_TABLE_VARIABLE
from mailroom.orchestrator.records.terms import BudgetMode, InvalidActionHandling

F = TypeVar("F", bound=Callable[..., Any])


def parse_memory_size(text: str) -> float:
    """`--max-memory`: MiB, or a size with a unit (`900M`, `16G`, `16GiB`)."""
    units = {"": 1.0, "M": 1.0, "MB": 1.0, "MIB": 1.0, "G": 1024.0, "GB": 1024.0, "GIB": 1024.0}
    body = text.strip().upper()
    number = body.rstrip("MGIB")
    unit = body[len(number) :]
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in units or not value > 0:
        raise click.BadParameter(f"{text!r} is not a memory size such as 900M or 16G")
    return value * units[unit]


def memory_policy(max_memory: str | None) -> MemoryPolicy:
    return MemoryPolicy(max_memory_mb=None if max_memory is None else parse_memory_size(max_memory))


def settings_from_options(options: dict[str, Any]) -> RunSettings:
    """The run's settings from `launch`'s options (`run_settings_options`)."""
    try:
        return RunSettings(
            budget_mode=cast(BudgetMode, options["budget_mode"]),
            max_policy_calls=options["max_policy_calls"],
            replan_interval=options["replan_interval"],
            max_chunk=options["max_chunk"],
            invalid_action_handling=cast(InvalidActionHandling, options["invalid_action_handling"]),
            response_timeout_s=options["response_timeout"],
            episode_wall_time_s=options["episode_wall_time"],
            proprio=options["proprio"],
            watch_mode=cast(WatchMode, options["watch_mode"]),
            # None: not given and no profile rule filled in (launch fills the profile's).
            min_decisions_before_stop=options["min_decisions_before_stop"] or 0,
            outbox_durability=cast(OutboxDurability, options["outbox_durability"]),
        )
    except ValueError as exc:
        raise click.UsageError(f"settings refused: {exc}") from exc


# In the order `launch --help` lists them.
_RUN_SETTINGS: tuple[Callable[[Any], Any], ...] = (
    click.option(
        "--budget-mode",
        type=click.Choice(["horizon", "decisions"]),
        default="decisions",
        show_default=True,
    ),
    click.option("--max-policy-calls", type=click.IntRange(min=1), default=200, show_default=True),
    click.option(
        "--replan-interval", type=click.IntRange(min=1, max=64), default=5, show_default=True
    ),
    click.option(
        "--max-chunk",
        type=click.IntRange(min=1, max=64),
        default=None,
        help="Most vectors a response may carry (default: the replan interval).",
    ),
    click.option(
        "--invalid-action-handling",
        type=click.Choice(["terminal", "feedback"]),
        default="feedback",
        show_default=True,
    ),
    click.option("--proprio", is_flag=True, help="Add the proprioception track (reported apart)."),
    click.option(
        "--response-timeout",
        type=click.FloatRange(min=0.1),
        default=600.0,
        show_default=True,
        help="Seconds an actor has for each response.",
    ),
    click.option(
        "--episode-wall-time",
        type=click.FloatRange(min=1),
        default=None,
        help="Seconds of policy loop per episode (default: no limit).",
    ),
    watch_mode_option(),
    click.option(
        "--min-decisions-before-stop",
        type=click.IntRange(min=0),
        default=None,
        help="Method persistence rule; never postpones caps (default: the profile's).",
    ),
    click.option(
        "--outbox-durability",
        type=click.Choice(["atomic", "durable"]),
        default="atomic",
        show_default=True,
        help="Observation files are always published atomically; 'durable' also fsyncs them.",
    ),
)


def run_settings_options(function: F) -> F:
    """The run's settings as options, read by `settings_from_options`."""
    for option in reversed(_RUN_SETTINGS):
        function = option(function)
    return function


def memory_option(function: F) -> F:
    return click.option(
        "--max-memory",
        "max_memory",
        type=str,
        default=None,
        help="Cap on the memory the workers' live episodes (simulators and actors) may hold "
        "in total (e.g. 16G); by default a new live episode starts only while 10% of the "
        "machine's memory stays available.",
    )(function)


class SlotsType(click.ParamType["int | Literal['auto']", Any]):
    """`--slots`: a count of at least 1, or `auto`."""

    name = "N|auto"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> int | Literal["auto"]:
        if isinstance(value, str) and value.strip().lower() == "auto":
            return "auto"
        try:
            count = int(value)
        except (TypeError, ValueError):
            count = 0
        if count < 1:
            self.fail(f"{value!r} is neither a count of at least 1 nor 'auto'", param, ctx)
        return count


def require_memory_limit_option(function: F) -> F:
    return click.option(
        "--require-memory-limit",
        is_flag=True,
        help="Refuse (exit 2) before anything starts unless the kernel enforces each "
        "actor's memory ceiling here (the profile's limits.memory_mb, a memory cgroup per "
        "episode). Without it, a launch where it cannot be enforced says so and runs.",
    )(function)


def slots_option(default: str | None) -> Callable[[F], F]:
    return click.option(
        "--slots",
        type=SlotsType(),
        default=default,
        show_default=default is not None,
        help="Cap on each worker's live episodes: while one actor thinks, the worker "
        "serves the others (each with its own endpoint and sandboxed actor). Within it "
        "a worker admits another live episode only while it keeps up and memory allows. "
        "auto: the plan's cases, at most 256 parked (or what memory holds of dedicated "
        "simulators) and what the kernel's limits hold; the launch prints the choice.",
    )


def simulators_option(default: str | None) -> Callable[[F], F]:
    return click.option(
        "--simulators",
        "holding",
        type=click.Choice(["parked", "dedicated"]),
        default=default,
        show_default=default is not None,
        help="How a worker holds its simulators: parked (one serving simulator and one "
        "starter per task; each waiting episode is parked as values, byte-identical to "
        "running alone, or runs on a simulator of its own where it cannot be) or "
        "dedicated (a simulator per live episode). Each result says which it had.",
    )


def executor_options(default: str | None) -> Callable[[F], F]:
    def apply(function: F) -> F:
        function = click.option(
            "--ray-address",
            default=None,
            help="With --executor ray: the Ray cluster's address (default: auto, the "
            "cluster this machine belongs to).",
        )(function)
        return click.option(
            "--executor",
            type=click.Choice(["local", "ray"]),
            default=default,
            show_default=default is not None,
            help="Where the workers run: worker processes on this machine, or Ray actors "
            "on a Ray cluster (each on one node, with --slots of its mailroom_slot "
            "resource; see docs/cluster.md).",
        )(function)

    return apply


def price_table_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--price-table FILE`: the coordinator's own prices for the gateway's costs (the
    manifest records its hash; a resume needs the same table)."""
    return click.option(
        "--price-table",
        "price_table",
        type=click.Path(path_type=Path, exists=True, dir_okay=False),
        default=None,
        help="A price table (mailroom.price_table/v1 JSON) for the provider gateway's costs, "
        "in place of the shipped one (orchestrator/gateway/prices.json).",
        callback=_use_price_table,
        expose_value=False,
        is_eager=True,
    )(command)


def _use_price_table(ctx: click.Context, param: click.Parameter, value: Path | None) -> None:
    """Name the table where this launch's workers read it (their environment)."""
    if value is not None:
        os.environ[PRICE_TABLE_VARIABLE] = str(value.resolve())
