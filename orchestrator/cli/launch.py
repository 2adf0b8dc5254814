"""`mailroom launch` and `resume`: running a campaign of blinded, confined episodes."""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, NoReturn, TypeVar, cast

import click
from mailroom.mailbox.endpoint import new_mailbox_root
from mailroom.mailbox.publish import OutboxDurability
from mailroom.mailbox.watcher import WatchMode
from mailroom.orchestrator.actors.confinement import (
    ConfinementError,
    ConfinementSettings,
    resolve_confinement,
    settings_of_run,
)
from mailroom.orchestrator.actors.launcher import ProcessLauncher, profile_launcher
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.actors.memory_cgroup import ceiling_problem
from mailroom.orchestrator.actors.profiles import (
    LoadedProfile,
    MethodProfile,
    ProfileError,
    load_profile,
    shipped_agents,
)
from mailroom.orchestrator.campaign.admission import (
    MemoryPolicy,
    MemoryUnknownError,
    capacity,
)
from mailroom.orchestrator.campaign.coordinator import Executor, LocalExecutor
from mailroom.orchestrator.campaign.kernel_capacity import Launch, kernel_refusal
from mailroom.orchestrator.campaign.slot_choice import (
    PARKED_SLOTS_CEILING,
    SlotChoice,
    choose_slots,
    kernel_fit_for,
)
from mailroom.orchestrator.catalog.plans import Plan
from mailroom.orchestrator.cli.exits import (
    EXIT_CLUSTER,
    EXIT_CONFLICT,
    EXIT_INCOMPLETE,
    EXIT_INFRASTRUCTURE,
    EXIT_OK,
    EXIT_USAGE,
)
from mailroom.orchestrator.cli.options import (
    confinement_option,
    console,
    default_run_dir,
    json_option,
    mailbox_root_option,
    para_dir_option,
    progress_bar,
    run_dir_argument,
    run_dir_option,
    watch_mode_option,
)
from mailroom.orchestrator.cli.report import print_report
from mailroom.orchestrator.episode.settings import RecordMode, RunSettings
from mailroom.orchestrator.gateway.prices import PriceTableError
from mailroom.orchestrator.gateway.server import (
    PRICE_TABLE_VARIABLE,
    GatewayError,
    manifest_record,
)
from mailroom.orchestrator.records.confinement import ConfinementMode
from mailroom.orchestrator.records.layout import RunPaths, attempt_id_of
from mailroom.orchestrator.records.terms import BudgetMode, InvalidActionHandling
from mailroom.orchestrator.sim.parked import Holding
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress


def load_profile_option(
    reference: str, model: str | None = None, *, model_passed: bool = True
) -> LoadedProfile:
    """`--profile` (a shipped agent's name, agents/<name>/, or a path) with `--model` declared."""
    try:
        loaded = load_profile(reference)
        profile = loaded.profile.with_model(model, passed=model_passed)
        return LoadedProfile(profile, loaded.directory)
    except ProfileError as exc:
        raise click.UsageError(str(exc)) from exc


def profile_actor_command(loaded: LoadedProfile, model: str | None) -> list[str] | None:
    """The profile's own actor command (None: it has none), `{profile_dir}` filled in and
    the model's arguments appended when a model is named."""
    declared = loaded.profile.actor
    if declared is None:
        if model is not None:
            raise click.UsageError(
                f"--model: the profile {loaded.name!r} starts no actor of its own; name the "
                "model in --actor, or hand it to the actor you start"
            )
        return None
    extra: list[str] = []
    if model is not None:
        if not declared.model_arguments:
            raise click.UsageError(
                f"--model: the profile {loaded.name!r} declares no way to pass a model to "
                "its actor (actor.model_arguments)"
            )
        extra = [a.replace("{model}", model) for a in declared.model_arguments]
    folder = str(loaded.directory)
    return [a.replace("{profile_dir}", folder) for a in declared.command] + extra


def refuse_unset_environment(loaded: LoadedProfile, spawns_actors: bool) -> None:
    """The profile's required pass-through variables must be set (exit 2, names only)."""
    if not spawns_actors:
        return
    unset = loaded.profile.confinement.unset_required(os.environ)
    provider = loaded.profile.provider
    gated = loaded.profile.uses_gateway and provider is not None
    if gated and provider is not None and not os.environ.get(provider.key_variable):
        _refuse(
            ConfinementError(
                f"the profile {loaded.name!r} reaches its provider through the gateway, "
                f"which reads the key from {provider.key_variable}: set it in launch's "
                "environment (the gateway keeps it; it never enters a sandbox or a record)"
            )
        )
    if unset:
        _refuse(
            ConfinementError(
                f"the profile {loaded.name!r} passes {', '.join(unset)} to its actor, and "
                f"{'it is' if len(unset) == 1 else 'they are'} not set here: set "
                f"{'it' if len(unset) == 1 else 'them'} in launch's environment (the value "
                "is passed to the actor and never written anywhere)"
            )
        )


def _refuse(exc: ConfinementError) -> NoReturn:
    console.print(f"[red]refused:[/red] {escape(str(exc))}", highlight=False)
    sys.exit(EXIT_USAGE)


def build_launcher(
    actor_command: list[str] | None,
    *,
    confinement: ConfinementSettings,
    limits: ActorLimits,
    run_dir: Path,
    mailbox_root: Path,
    profile: LoadedProfile,
) -> ProcessLauncher | None:
    """The run's actor launcher, checked before any worker starts (exit 2 if the sandbox
    cannot start or the command names something of the evaluator)."""
    try:
        launcher = profile_launcher(
            actor_command,
            profile=profile,
            confinement=confinement,
            limits=limits,
            run_dir=run_dir,
            mailbox_root=mailbox_root,
        )
    except ConfinementError as exc:
        _refuse(exc)
    if launcher is not None and launcher.provider is not None:
        try:  # its upstream and price table, refused now rather than in a worker
            manifest_record(launcher.provider.declaration)
        except (GatewayError, PriceTableError) as exc:
            _refuse(ConfinementError(str(exc)))
    return launcher


def check_memory_ceiling(
    memory_mb: int | None, *, spawns_actors: bool, required: bool, executor: str
) -> None:
    """Before anything starts: whether each actor's memory ceiling is enforced by the
    kernel here, said on stderr when it is not; `--require-memory-limit` refuses then
    (exit 2)."""
    if required and executor != "local":
        problem: str | None = "it is checked on this machine, not on a cluster's nodes"
    elif required and not spawns_actors:
        problem = "external actors are started by the coordinator, not here"
    elif not spawns_actors:
        return
    else:
        problem = ceiling_problem(memory_mb)
    if problem is None:
        return
    if required:
        console.print(
            f"[red]refused:[/red] --require-memory-limit: {escape(problem)}", highlight=False
        )
        sys.exit(EXIT_USAGE)
    console.print(
        f"[yellow]memory not enforced:[/yellow] {escape(problem)}; actors run without a "
        "kernel memory ceiling, as each actor_started event records "
        "(--require-memory-limit refuses instead)",
        highlight=False,
    )


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


def _progress_listener(progress: Progress, task: Any, counts: dict[str, int], run_dir: Path) -> Any:
    def listen(kind: str, payload: tuple[Any, ...]) -> None:
        if kind in WORKER_EVENTS:
            print_worker_event(progress.console, kind, payload)
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


def execute_launch(
    run_dir: Path,
    *,
    plan_bytes: bytes,
    profile: LoadedProfile,
    settings: RunSettings,
    actor_command: list[str] | None,
    mailbox_root: Path,
    workers: int,
    record: RecordMode,
    rerun_errored: bool,
    as_json: bool,
    confinement: ConfinementSettings,
    slots: int | Literal["auto"] = 1,
    memory: MemoryPolicy | None = None,
    executor: str = "local",
    ray_address: str = "auto",
    holding: Holding = "parked",
    require_memory_limit: bool = False,
    finish: Callable[[Path], int] | None = None,
) -> None:
    """Run the plan's cases into `run_dir` and end the command: the run's report and its
    exit code, or, with `finish`, what `finish` prints of the run and the code it
    returns (the demo's one episode)."""
    from mailroom.orchestrator.campaign.launch import (
        CampaignRequest,
        NestedDirectoriesError,
        refuse_nesting,
        run_campaign,
    )
    from mailroom.orchestrator.campaign.manifest import ManifestConflictError
    from mailroom.orchestrator.catalog.plans import PlanError
    from mailroom.orchestrator.cluster.errors import ClusterUnavailableError
    from mailroom.orchestrator.families.plans import parse_plan
    from mailroom.orchestrator.records.run_directory import RunLockedError
    from mailroom.orchestrator.results.reporter import build_report, report_json

    try:
        plan = parse_plan(plan_bytes)
    except PlanError as exc:
        raise click.UsageError(f"plan refused: {exc}") from exc
    try:
        refuse_nesting(run_dir, mailbox_root)
    except NestedDirectoriesError as exc:
        raise click.UsageError(str(exc)) from exc
    refuse_private_mailbox_root(run_dir, mailbox_root, plan)
    check_memory_ceiling(
        profile.profile.limits.memory_mb,
        spawns_actors=actor_command is not None,
        required=require_memory_limit,
        executor=executor,
    )
    memory = memory or MemoryPolicy()
    choice: SlotChoice | None = None
    if executor == "local":  # a Ray worker's node has limits of its own
        watched = settings.watch_mode == "inotify"
        cases = len(plan.cases)
        if slots == "auto":
            fit = kernel_fit_for(workers, cases, record_full=record == "full", inotify=watched)
            choice = choose_slots(
                holding=holding, workers=workers, cases=cases, policy=memory, kernel_fit=fit
            )
            slots = choice.slots
        beyond = kernel_refusal(Launch(workers, slots, cases, record == "full", watched))
        if beyond is not None:  # before anything is written or started
            console.print(f"[red]refused:[/red] {escape(beyond)}", highlight=False)
            sys.exit(EXIT_USAGE)
    limits = profile.profile.limits
    chosen, slots = _executor(executor, ray_address, workers, slots, holding, len(plan.cases))
    request = CampaignRequest(
        run_dir=run_dir,
        plan=plan,
        plan_bytes=plan_bytes,
        profile=profile.name,
        declaration=profile.profile.declaration(),
        profile_dir=profile.directory,
        settings=settings,
        actor_command=actor_command,
        launcher=build_launcher(
            actor_command,
            confinement=confinement,
            limits=limits,
            run_dir=run_dir,
            mailbox_root=mailbox_root,
            profile=profile,
        ),
        limits=limits,
        mailbox_root=mailbox_root,
        workers=workers,
        record=record,
        confinement=confinement,
        rerun_errored=rerun_errored,
        slots=slots,
        holding=holding,
        memory=memory,
        executor=chosen,
    )
    if executor == "local":  # stderr: --json's stdout stays clean
        _print_capacity(request.memory, workers, slots, holding, choice)
    counts = {"success": 0, "failure": 0, "error": 0}
    try:
        with progress_bar(hidden=as_json) as progress:
            task = progress.add_task("starting", total=None)
            # stdout carries the report alone: what a library prints meanwhile (Ray's
            # driver prints its workers' deaths to stdout) goes to stderr.
            with contextlib.redirect_stdout(sys.stderr):
                outcome = run_campaign(
                    request,
                    _progress_listener(progress, task, counts, run_dir),
                    lambda n: progress.update(task, total=n),
                )
    except (ManifestConflictError, RunLockedError) as exc:
        console.print(f"[red]refused:[/red] {exc}")
        sys.exit(EXIT_CONFLICT)
    except ClusterUnavailableError as exc:
        console.print(f"[red]cluster unavailable:[/red] {escape(str(exc))}", highlight=False)
        sys.exit(EXIT_CLUSTER)
    except OSError as exc:
        console.print(f"[red]infrastructure error:[/red] the run directory failed: {exc}")
        sys.exit(EXIT_INFRASTRUCTURE)
    if outcome.unrecorded:
        for attempt_id, reason in outcome.unrecorded:
            console.print(f"[red]infrastructure error:[/red] {attempt_id}: {reason}")
        sys.exit(EXIT_INFRASTRUCTURE)
    if finish is not None:
        sys.exit(finish(run_dir))
    report = build_report(run_dir)
    if as_json:
        sys.stdout.write(report_json(report) + "\n")
    else:
        print_report(report)
        console.print(f"run directory (private): {run_dir}")
    sys.exit(EXIT_OK if report.complete and not report.corrupt_results else EXIT_INCOMPLETE)


@contextlib.contextmanager
def own_mailbox_root(given: Path | None) -> Iterator[Path]:
    """The mailbox root given, or a fresh one that is removed again if it is still empty
    when the command ends (a refused launch leaves nothing behind)."""
    if given is not None:
        yield given
        return
    root = new_mailbox_root()
    try:
        yield root
    finally:
        with contextlib.suppress(OSError):
            root.rmdir()  # only an empty folder: endpoints stay for the audit


def refuse_private_mailbox_root(run_dir: Path, mailbox_root: Path, plan: Plan) -> None:
    """Every endpoint path lies under the mailbox root and is handed to an actor: a root
    whose path names the run, a case, a suite, a task, a seed, a date or the benchmark is
    refused (exit 2) before anything is made, naming the word."""
    from mailroom.orchestrator.audit.patterns import launch_identifiers, path_disclosures
    from mailroom.orchestrator.records.run_directory import RunDirectory

    run = RunDirectory(run_dir)
    manifest = run.read_manifest() if run.exists() else None
    identifiers = launch_identifiers(
        run_id=str(manifest["run_id"]) if manifest else run_dir.resolve().name,
        run_dir=run_dir,
        cases=plan.to_cases(),
        created_at=str(manifest["volatile"]["created_at"]) if manifest else None,
    )
    found = path_disclosures(mailbox_root, identifiers)
    if found:
        named = "; ".join(f"{kind.replace('_', ' ')} in {shown!r}" for kind, shown in found)
        _refuse(
            ConfinementError(
                f"the mailbox root {mailbox_root} is part of every endpoint path an actor is "
                f"handed, and it names what an actor must not learn ({named}): choose "
                "another --mailbox-root (the default is a fresh random folder)"
            )
        )


def recorded_profile(manifest: dict[str, Any], folder: Path | None) -> LoadedProfile:
    """The profile a run was launched with, as its manifest recorded it (a resume runs
    the same method), and the folder its programs come from."""
    section = manifest["profile"]
    if folder is None or not folder.is_dir():
        # Gone (a run made before the agents moved to agents/, or on another machine):
        # the shipped agent of that name, whose programs the manifest check compares.
        shipped = shipped_agents().get(str(section["name"]))
        folder = shipped if shipped is not None else folder or Path(str(section["name"]))
    try:
        profile = MethodProfile.model_validate(section["declaration"])
    except ValueError:
        # A declaration this version cannot read: the profile as it is now, which the
        # manifest check then refuses if it differs from the recorded one.
        return load_profile_option(str(folder))
    return LoadedProfile(profile, folder)


def _executor(
    name: str,
    ray_address: str,
    workers: int,
    slots: int | Literal["auto"],
    holding: Holding,
    cases: int,
) -> tuple[Executor, int]:
    """The launch's executor and slots; a cluster is reached and checked before
    anything is written (exit 9 if it cannot place the workers)."""
    if name == "local":
        assert slots != "auto"  # chosen for this machine already
        return LocalExecutor(), slots
    from mailroom.orchestrator.cluster.errors import ClusterUnavailableError
    from mailroom.orchestrator.cluster.executor import SLOT_RESOURCE, RayExecutor

    ray_executor = RayExecutor(ray_address)
    try:
        if slots == "auto":  # the most that the nodes' slots and memory place
            at_most = max(1, cases)
            if holding == "parked":
                at_most = min(at_most, PARKED_SLOTS_CEILING)
            slots = ray_executor.widest_slots(workers, holding, at_most)
        nodes = ray_executor.check(workers, slots, holding)
    except ClusterUnavailableError as exc:
        console.print(f"[red]cluster unavailable:[/red] {escape(str(exc))}", highlight=False)
        sys.exit(EXIT_CLUSTER)
    declared = sum(n.slots for n in nodes)
    console.print(
        f"Ray cluster at {escape(ray_address)}: {len(nodes)} node(s), {declared:g} "
        f"{SLOT_RESOURCE}; live episodes: at most {workers * slots} ({workers} worker(s) x "
        f"{slots} slot(s)), each worker on one node",
        highlight=False,
    )
    return ray_executor, slots


def _print_capacity(
    policy: MemoryPolicy,
    workers: int,
    slots: int,
    holding: Holding = "dedicated",
    choice: SlotChoice | None = None,
) -> None:
    """Before anything starts: the slots and how many live episodes memory can hold."""
    if choice is not None:
        console.print(choice.reason, highlight=False)
    if holding == "parked" and slots > 1:
        console.print(
            f"live episodes: at most {workers * slots} ({workers} worker(s) x {slots} "
            f"slot(s)), parked on a serving simulator and a starter per task; each worker "
            f"admits another while its serving thread keeps up and {policy.margin:.0%} of "
            "memory stays free",
            highlight=False,
        )
        return
    try:
        fits = capacity(policy, workers, slots)
    except MemoryUnknownError as exc:
        console.print(f"[yellow]memory unknown:[/yellow] {escape(str(exc))}; one live episode")
        return
    cap = "" if policy.max_memory_mb is None else f", capped at {policy.max_memory_mb:.0f} MiB"
    console.print(
        f"live episodes: at most {workers * slots} ({workers} worker(s) x {slots} slot(s)); "
        f"memory holds about {fits.live_episodes} ({fits.usable_mb / 1024:.1f} GiB usable, "
        f"keeping {policy.margin:.0%} free{cap}; estimated {fits.first_mb / 1024:.1f} GiB "
        f"for a worker's first simulator, {fits.further_mb / 1024:.1f} GiB for each further)"
    )


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


F = TypeVar("F", bound=Callable[..., Any])


def _memory_option(function: F) -> F:
    return click.option(
        "--max-memory",
        "max_memory",
        type=str,
        default=None,
        help="Cap on the memory the workers' live episodes may hold in total (e.g. 16G); "
        "by default a new live episode starts only while 10% of the machine's memory "
        "stays available.",
    )(function)


class _SlotsType(click.ParamType["int | Literal['auto']", Any]):
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


def _require_memory_limit_option(function: F) -> F:
    return click.option(
        "--require-memory-limit",
        is_flag=True,
        help="Refuse (exit 2) before anything starts unless the kernel enforces each "
        "actor's memory ceiling here (the profile's limits.memory_mb, a memory cgroup per "
        "episode). Without it, a launch where it cannot be enforced says so and runs.",
    )(function)


def _slots_option(default: str | None) -> Callable[[F], F]:
    return click.option(
        "--slots",
        type=_SlotsType(),
        default=default,
        show_default=default is not None,
        help="Cap on each worker's live episodes: while one actor thinks, the worker "
        "serves the others (each with its own endpoint and sandboxed actor). Within it "
        "a worker admits another live episode only while it keeps up and memory allows. "
        "auto: the plan's cases, at most 256 parked (or what memory holds of dedicated "
        "simulators) and what the kernel's limits hold; the launch prints the choice.",
    )


def _simulators_option(default: str | None) -> Callable[[F], F]:
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


def _executor_options(default: str | None) -> Callable[[F], F]:
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


def _memory_policy(max_memory: str | None) -> MemoryPolicy:
    return MemoryPolicy(max_memory_mb=None if max_memory is None else parse_memory_size(max_memory))


def _settings_from(options: dict[str, Any]) -> RunSettings:
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


def _price_table_option(command: Callable[..., Any]) -> Callable[..., Any]:
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


@click.command()
@click.argument("plan_file", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option(
    "--profile",
    required=True,
    help="Method profile: a shipped agent's name (agents/<name>/), or the path of a "
    "profile.json (or of a folder holding one).",
)
@click.option(
    "--model",
    default=None,
    help="The model the actor uses, as you declare it: passed to the profile's actor "
    "command and recorded as declared, unverified (default: the actor's own, unknown).",
)
@para_dir_option()
@run_dir_option("The run directory itself (default: new, under runs/<profile>/ here).")
@mailbox_root_option()
@click.option(
    "--actor",
    "actor",
    default=None,
    help="Actor command started once per episode, e.g. 'python3 a.py {endpoint}' "
    "(default: the profile's own). Without either, launch messages are printed for "
    "external actors.",
)
@click.option(
    "--budget-mode",
    type=click.Choice(["horizon", "decisions"]),
    default="decisions",
    show_default=True,
)
@click.option("--max-policy-calls", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--replan-interval", type=click.IntRange(min=1, max=64), default=5, show_default=True)
@click.option(
    "--max-chunk",
    type=click.IntRange(min=1, max=64),
    default=None,
    help="Most vectors a response may carry (default: the replan interval).",
)
@click.option(
    "--invalid-action-handling",
    type=click.Choice(["terminal", "feedback"]),
    default="feedback",
    show_default=True,
)
@click.option("--proprio", is_flag=True, help="Add the proprioception track (reported apart).")
@click.option(
    "--response-timeout",
    type=click.FloatRange(min=0.1),
    default=600.0,
    show_default=True,
    help="Seconds an actor has for each response.",
)
@click.option(
    "--episode-wall-time",
    type=click.FloatRange(min=1),
    default=None,
    help="Seconds of policy loop per episode (default: no limit).",
)
@watch_mode_option()
@click.option(
    "--min-decisions-before-stop",
    type=click.IntRange(min=0),
    default=None,
    help="Method persistence rule; never postpones caps (default: the profile's).",
)
@click.option(
    "--outbox-durability",
    type=click.Choice(["atomic", "durable"]),
    default="atomic",
    show_default=True,
    help="Observation files are always published atomically; 'durable' also fsyncs them.",
)
@confinement_option(
    "How each --actor process is confined (default: sandbox; refused with exit 2 "
    "where it cannot start). 'none' runs actors unconfined, as your own user, and every "
    "result says so. Without --actor, confinement is 'external'.",
    None,
)
@click.option(
    "--actor-path",
    "actor_paths",
    multiple=True,
    type=click.Path(path_type=Path, exists=True),
    help="An extra path the sandboxed actor may read (e.g. an agent CLI's installation); "
    "repeatable. Refused if it holds or lies inside the project, the Python environment, "
    "the LIBERO package, the run directory or the mailbox root.",
)
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True)
@_slots_option("auto")
@_simulators_option("parked")
@_memory_option
@_require_memory_limit_option
@_executor_options("local")
@click.option("--record", type=click.Choice(["full", "minimal"]), default="full", show_default=True)
@_price_table_option
@json_option("Print the report as JSON.")
def launch(
    plan_file: Path,
    profile: str,
    model: str | None,
    run_dir: Path | None,
    mailbox_root: Path | None,
    actor: str | None,
    confinement: str | None,
    actor_paths: tuple[Path, ...],
    workers: int,
    slots: int | Literal["auto"],
    holding: Holding,
    max_memory: str | None,
    require_memory_limit: bool,
    executor: str,
    ray_address: str | None,
    record: RecordMode,
    as_json: bool,
    **options: Any,
) -> None:
    """Run every case of PLAN_FILE, each with a fresh blinded actor and endpoint.

    Exit codes: 0 every selected case has a result; 4 the run is incomplete or holds a
    corrupt result; 5 refused (conflicting manifest, run in use); 7 the run directory
    failed (full, read-only): nothing partial was written; 2 usage error.
    """
    # With --actor the command is the coordinator's: a model named is recorded only.
    passed = actor is None and confinement != "external"
    loaded = load_profile_option(profile, model, model_passed=passed)
    if options["min_decisions_before_stop"] is None:
        rule = loaded.profile.persistence_rule
        options["min_decisions_before_stop"] = rule.min_decisions_before_stop
    settings = _settings_from(options)
    memory = _memory_policy(max_memory)
    declaration = loaded.profile.confinement
    if actor is not None:
        actor_command: list[str] | None = shlex.split(actor)
    elif confinement == "external":
        actor_command = None  # launch messages, even for a profile with a command
    else:
        actor_command = profile_actor_command(loaded, model)
    if actor_command == []:
        raise click.UsageError("--actor is empty")
    if ray_address is not None and executor != "ray":
        raise click.UsageError("--ray-address goes with --executor ray")
    if executor == "ray" and actor_command is None:
        raise click.UsageError(
            "--executor ray needs --actor: an actor runs on its episode's node, "
            "started by the worker there"
        )
    refuse_unset_environment(loaded, actor_command is not None)
    if run_dir is None:
        run_dir = default_run_dir(loaded.name)
    try:
        resolved = resolve_confinement(
            requested=cast(ConfinementMode | None, confinement),
            spawns_actors=actor_command is not None,
            declaration=declaration,
            actor_paths=tuple(str(p.resolve()) for p in actor_paths),
        )
    except ConfinementError as exc:
        raise click.UsageError(str(exc)) from exc
    with own_mailbox_root(mailbox_root) as root:
        execute_launch(
            run_dir,
            plan_bytes=plan_file.read_bytes(),
            profile=loaded,
            settings=settings,
            actor_command=actor_command,
            mailbox_root=root,
            workers=workers,
            record=record,
            rerun_errored=False,
            as_json=as_json,
            confinement=resolved,
            slots=slots,
            holding=holding,
            memory=memory,
            executor=executor,
            ray_address=ray_address or "auto",
            require_memory_limit=require_memory_limit,
        )


@click.command()
@run_dir_argument()
@click.option(
    "--rerun-errored",
    is_flag=True,
    help="Explicitly re-run errored cases as new, recorded attempts "
    "(never a disclosed, not-blinded attempt).",
)
@mailbox_root_option()
@click.option("--workers", type=click.IntRange(min=1), default=None)
@_slots_option(None)
@_simulators_option(None)
@_memory_option
@_require_memory_limit_option
@_executor_options(None)
@para_dir_option()
@_price_table_option
@json_option("Print the report as JSON.")
def resume(
    run_dir: Path,
    rerun_errored: bool,
    mailbox_root: Path | None,
    workers: int | None,
    slots: int | Literal["auto"] | None,
    holding: Holding | None,
    max_memory: str | None,
    require_memory_limit: bool,
    executor: str | None,
    ray_address: str | None,
    as_json: bool,
) -> None:
    """Continue RUN_DIR: skip completed cases, run unattempted ones, and record any
    attempt cut short after its actor saw observations as errored (interrupted).

    Workers, slots and the executor (with its Ray address) default to the run's last
    launch or resume."""
    from mailroom.orchestrator.campaign.launch import last_launch
    from mailroom.orchestrator.records.run_directory import RunDirectory, not_a_run_directory

    run = RunDirectory(run_dir)
    if not run.exists():
        raise click.UsageError(not_a_run_directory(run_dir))
    last = last_launch(run)
    executor = executor or last.executor
    if ray_address is not None and executor != "ray":
        raise click.UsageError("--ray-address goes with --executor ray")
    ray_address = ray_address or (last.ray_address if last.executor == "ray" else None)
    manifest = run.read_manifest()
    volatile = manifest["volatile"]
    settings = RunSettings.model_validate(manifest["settings"])
    loaded = recorded_profile(manifest, last.profile_dir)
    refuse_unset_environment(loaded, volatile["actor_command"] is not None)
    with own_mailbox_root(mailbox_root) as root:
        execute_launch(
            run_dir,
            plan_bytes=run.plan_path.read_bytes(),
            profile=loaded,
            settings=settings,
            actor_command=volatile["actor_command"],
            mailbox_root=root,
            workers=workers or int(volatile["workers"]),
            record=cast(RecordMode, manifest["record"]),
            rerun_errored=rerun_errored,
            as_json=as_json,
            confinement=settings_of_run(manifest),
            slots=slots or last.slots,
            holding=holding or last.holding,
            memory=_memory_policy(max_memory),
            executor=executor,
            ray_address=ray_address or "auto",
            require_memory_limit=require_memory_limit,
        )
