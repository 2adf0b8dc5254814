"""`mailroom launch` and `resume`: running a campaign of blinded, confined episodes."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Literal, cast

import click
from mailroom.orchestrator.actors.confinement import (
    ConfinementError,
    resolve_confinement,
    settings_of_run,
)
from mailroom.orchestrator.cli.family_options import local_copy_options
from mailroom.orchestrator.cli.launch_options import (
    executor_options,
    memory_option,
    memory_policy,
    price_table_option,
    require_memory_limit_option,
    run_settings_options,
    settings_from_options,
    simulators_option,
    slots_option,
)
from mailroom.orchestrator.cli.launch_preflight import LaunchInputs, own_mailbox_root
from mailroom.orchestrator.cli.launch_profile import (
    load_profile_option,
    profile_actor_command,
    recorded_profile,
    refuse_unset_environment,
)
from mailroom.orchestrator.cli.launch_run import execute_launch
from mailroom.orchestrator.cli.options import (
    confinement_option,
    default_run_dir,
    json_option,
    mailbox_root_option,
    run_dir_argument,
    run_dir_option,
)
from mailroom.orchestrator.episode.settings import RecordMode, RunSettings
from mailroom.orchestrator.records.confinement import ConfinementMode
from mailroom.orchestrator.sim.parked import Holding


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
@local_copy_options()
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
@run_settings_options
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
@slots_option("auto")
@simulators_option("parked")
@memory_option
@require_memory_limit_option
@executor_options("local")
@click.option("--record", type=click.Choice(["full", "minimal"]), default="full", show_default=True)
@price_table_option
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
    failed (full, read-only): nothing partial was written; 2 usage error; 130 stopped by
    Ctrl-C, 143 by SIGTERM (`mailroom resume RUN_DIR` continues the run).
    """
    # With --actor the command is the coordinator's: a model named is recorded only.
    passed = actor is None and confinement != "external"
    loaded = load_profile_option(profile, model, model_passed=passed)
    if options["min_decisions_before_stop"] is None:
        rule = loaded.profile.persistence_rule
        options["min_decisions_before_stop"] = rule.min_decisions_before_stop
    settings = settings_from_options(options)
    memory = memory_policy(max_memory)
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
            LaunchInputs(
                run_dir=run_dir,
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
@slots_option(None)
@simulators_option(None)
@memory_option
@require_memory_limit_option
@executor_options(None)
@local_copy_options()
@price_table_option
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
    launch or resume. Stopped by Ctrl-C it exits 130, by SIGTERM 143."""
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
            LaunchInputs(
                run_dir=run_dir,
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
                memory=memory_policy(max_memory),
                executor=executor,
                ray_address=ray_address or "auto",
                require_memory_limit=require_memory_limit,
            )
        )
