"""A launch's live episodes against the kernel's limits: the arithmetic on made-up limits,
and a real `mailroom launch` under a lowered descriptor limit, refused before anything
starts. What one live episode really holds is measured in test_live_episodes_at_scale.py.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_plan, launch_command
from kernel_limit_values import ROOMY
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.campaign.capacity import kernel as kc
from mailroom.orchestrator.campaign.capacity.kernel import Launch, check, refusal
from mailroom.orchestrator.campaign.capacity.kernel_limits import KernelLimits, raise_open_files


def _demand(launch: Launch, limits: KernelLimits, resource_name: str) -> kc.Demand:
    [found] = [d for d in check(launch, limits) if d.resource.startswith(resource_name)]
    return found


def test_demand_is_the_per_episode_costs_times_the_live_episodes() -> None:
    launch = Launch(workers=2, slots=300, cases=1000, record_full=False)
    assert launch.live == 600
    fds = _demand(launch, ROOMY, "open descriptors")
    assert fds.need == kc.WORKER_BASE_FDS + 300 * kc.FDS_PER_EPISODE  # per worker
    assert fds.limit == 1 << 20  # the hard limit: each worker raises its soft one to it
    full = _demand(dataclasses.replace(launch, record_full=True), ROOMY, "open descriptors")
    assert full.need == fds.need + 300 * kc.VIDEO_FDS_PER_EPISODE
    assert _demand(launch, ROOMY, "inotify instances").need == 2
    assert _demand(launch, ROOMY, "inotify watches").need == 600
    tasks = _demand(launch, ROOMY, "pids")
    per_episode = kc.THREADS_PER_EPISODE + kc.PROCESSES_PER_EPISODE
    assert tasks.need == 2 * (1 + kc.WORKER_BASE_THREADS) + 600 * per_episode
    assert tasks.in_use == 200  # threads alive on the machine take pids too
    assert _demand(launch, ROOMY, "user namespaces").need == 600
    assert all(d.fits for d in check(launch, ROOMY))
    assert refusal(launch, ROOMY) is None


def test_live_episodes_are_capped_by_the_plan() -> None:
    # Ten cases never make more than ten live episodes, however many slots.
    small = Launch(workers=4, slots=300, cases=10)
    assert (small.active_workers, small.live_per_worker, small.live) == (4, 10, 10)
    assert _demand(small, ROOMY, "inotify watches").need == 10
    assert Launch(workers=8, slots=2, cases=3).active_workers == 3


def test_too_few_descriptors_are_refused_naming_the_limit_and_the_slots_that_fit() -> None:
    limits = dataclasses.replace(ROOMY, open_files_hard=1024)
    launch = Launch(workers=1, slots=300, cases=500, record_full=True)
    why = refusal(launch, limits)
    assert why is not None
    need = kc.WORKER_BASE_FDS + 300 * (kc.FDS_PER_EPISODE + kc.VIDEO_FDS_PER_EPISODE)
    fit = (1024 - kc.WORKER_BASE_FDS) // (kc.FDS_PER_EPISODE + kc.VIDEO_FDS_PER_EPISODE)
    assert "RLIMIT_NOFILE" in why and "is 1,024" in why and f"need {need:,}" in why
    assert f"--slots {fit} per worker" in why and "raise the hard limit" in why
    assert refusal(dataclasses.replace(launch, slots=fit), limits) is None
    assert refusal(dataclasses.replace(launch, slots=fit + 1), limits) is not None


def test_shared_limits_count_what_is_in_use_already() -> None:
    launch = Launch(workers=1, slots=300, cases=500)
    # 300 watches fit in 400, not beside 150 another program holds.
    limits = dataclasses.replace(ROOMY, inotify_watches=400, inotify_watches_used=150)
    why = refusal(launch, limits)
    assert why is not None
    assert "fs.inotify.max_user_watches is 400 (150 in use already)" in why
    assert "--slots 250 per worker" in why and "--watch-mode polling" in why
    # Polling watches nothing: the same launch fits.
    assert refusal(dataclasses.replace(launch, inotify=False), limits) is None
    instances = dataclasses.replace(ROOMY, inotify_instances=128, inotify_instances_used=127)
    why = refusal(Launch(workers=2, slots=1, cases=10), instances)
    assert why is not None and "max_user_instances is 128" in why and "fewer --workers" in why


def test_pids_threads_and_user_processes_are_each_a_limit() -> None:
    launch = Launch(workers=1, slots=300, cases=500)
    need = 1 + kc.WORKER_BASE_THREADS + 300 * (kc.THREADS_PER_EPISODE + kc.PROCESSES_PER_EPISODE)
    in_use = dataclasses.replace(ROOMY, user_processes_used=200)  # as the machine's 200
    for field, name in (
        ("pid_max", "kernel.pid_max"),
        ("threads_max", "kernel.threads-max"),
        ("user_processes", "RLIMIT_NPROC"),
    ):
        limits = dataclasses.replace(in_use, **{field: need + 200 - 1})
        why = refusal(launch, limits)
        assert why is not None and name in why and f"need {need:,}" in why, (field, why)
        assert "(200 in use already)" in why
        assert refusal(launch, dataclasses.replace(in_use, **{field: need + 200})) is None
    # No limit where none is enforced (root's processes): nothing to refuse.
    assert refusal(launch, dataclasses.replace(ROOMY, user_processes=None)) is None
    why = refusal(launch, dataclasses.replace(ROOMY, user_namespaces=299))
    assert why is not None and "user.max_user_namespaces is 299" in why


def test_a_worker_raises_its_soft_descriptor_limit_to_the_hard_one() -> None:
    script = (
        "import resource; from mailroom.orchestrator.campaign.capacity.kernel_limits import "
        "raise_open_files as r; o = r(); print(o.soft_before, o.soft, o.hard, "
        "resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
    )
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard)),
    )
    assert proc.stdout.split() == ["64", str(hard), str(hard), str(hard)]
    # Already at the hard limit: nothing changes.
    same = raise_open_files()
    assert same.soft == same.hard or same.soft == resource.RLIM_INFINITY


@pytest.mark.parametrize("as_json", [False, True])
def test_a_launch_beyond_the_descriptor_limit_is_refused_before_anything_starts(
    tmp_path: Path, mailbox_root: Path, as_json: bool
) -> None:
    plan = cli_plan(
        tmp_path / "plan.json",
        "task_coverage",
        "--suite",
        "libero_10",
        "--task-ids",
        "0,1,2,3",
        "--init-states",
        "0,1,2,3,4,5",
    )
    run_dir = tmp_path / "run"
    command = launch_command(plan, run_dir, mailbox_root, "{python} -c pass")
    command += ["--slots", "24", "--record", "minimal"] + (["--json"] if as_json else [])
    # A hard limit of 200 descriptors: 24 live episodes need 15 + 24 x 12 = 303.
    proc = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "400"},
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200)),
    )
    assert proc.returncode == 2, proc.stderr
    stderr = " ".join(proc.stderr.split())
    assert "refused:" in stderr and "24 live episode(s) (1 worker(s) x 24 slot(s))" in stderr
    assert "RLIMIT_NOFILE" in stderr and "is 200" in stderr and "need 303" in stderr
    assert "--slots 15 per worker" in stderr and "raise the hard limit" in stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert not run_dir.exists()  # nothing written
    assert list(mailbox_root.iterdir()) == []  # no endpoint made


def test_an_actors_declared_processes_count_against_the_machines_pids_and_threads() -> None:
    # A profile that declares limits.processes is counted at that cap per live actor,
    # against the machine's pids and threads and this user's (checked only when it is
    # not root, where the actors run as this user). One that declares none: its one
    # process.
    assert kc.actor_tasks(ActorLimits()) == kc.ACTOR_PROCESSES_PER_EPISODE
    assert kc.actor_tasks(ActorLimits(processes=256)) == 256
    plain = Launch(workers=1, slots=100, cases=100)
    agents = dataclasses.replace(plain, actor_tasks=256)
    base = 1 + kc.WORKER_BASE_THREADS
    per_agent = kc.THREADS_PER_EPISODE + kc.BWRAP_PROCESSES_PER_EPISODE + 256
    assert _demand(agents, ROOMY, "pids").need == base + 100 * per_agent
    assert _demand(agents, ROOMY, "threads of the machine").need == base + 100 * per_agent
    assert _demand(agents, ROOMY, "processes and threads of this user").need == (
        base + 100 * per_agent
    )
    # This machine's pid_max (32,768) holds 100 such agents, not 100 at the default cap.
    limits = dataclasses.replace(ROOMY, pid_max=32_768)
    assert refusal(agents, limits) is None
    why = refusal(dataclasses.replace(plain, actor_tasks=1024), limits)
    assert why is not None and "kernel.pid_max is 32,768" in why
    assert "declare a lower limits.processes" in why
    fit = (32_768 - 200 - base) // (per_agent - 256 + 1024)
    assert f"--slots {fit} per worker" in why
