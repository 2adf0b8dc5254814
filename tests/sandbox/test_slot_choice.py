"""`--slots auto`: the cap chosen from the plan, the holding, memory and the kernel's
limits (the arithmetic on made-up machines), and a real `mailroom launch` that prints
its choice and is checked against the kernel with it before anything starts."""

from __future__ import annotations

import dataclasses
import fcntl
import os
import resource
import subprocess
from pathlib import Path

import pytest
from conftest import cli_plan, launch_command
from kernel_limit_values import ROOMY
from mailroom.orchestrator.campaign.capacity.decide import (
    CapacityRequest,
    KernelLimitsRefusal,
    PlacementRefusal,
    decide_capacity,
)
from mailroom.orchestrator.campaign.capacity.kernel import (
    WORKER_BASE_FDS,
    Launch,
    kernel_slots_that_fit,
    refusal,
)
from mailroom.orchestrator.campaign.capacity.memory import (
    FIRST_SIMULATOR_MB,
    FURTHER_SIMULATOR_MB,
    MachineMemory,
    MemoryPolicy,
)
from mailroom.orchestrator.campaign.capacity.placement import (
    NodeCapacity,
    widest_slots,
    worker_memory_mb,
)
from mailroom.orchestrator.campaign.capacity.slots import PARKED_SLOTS_CEILING, choose_slots

BIG = MachineMemory(total_mb=24_000.0, available_mb=22_000.0)


def test_parked_takes_the_plans_cases_up_to_the_ceiling() -> None:
    policy = MemoryPolicy()
    few = choose_slots(holding="parked", workers=1, cases=10, policy=policy, kernel_fit=None)
    assert few.slots == 10 and "the plan's 10 case(s)" in few.reason
    many = choose_slots(holding="parked", workers=2, cases=500, policy=policy, kernel_fit=None)
    assert many.slots == PARKED_SLOTS_CEILING == 256
    assert "--slots auto: 256 per worker" in many.reason and "ceiling" in many.reason
    one = choose_slots(holding="parked", workers=4, cases=1, policy=policy, kernel_fit=None)
    assert one.slots == 1  # nothing to park beside: the worker keeps its simulator


def test_the_kernels_limits_bound_the_choice_and_never_refuse_it() -> None:
    tight = dataclasses.replace(ROOMY, open_files=200, open_files_hard=200)
    fit = kernel_slots_that_fit(Launch(1, 1, 500, record_full=False), tight)
    assert fit == (200 - WORKER_BASE_FDS) // 12  # the worker's descriptors, 12 per episode
    # With videos, 14 each.
    assert kernel_slots_that_fit(Launch(1, 1, 500), tight) == (200 - WORKER_BASE_FDS) // 14
    choice = choose_slots(
        holding="parked", workers=1, cases=500, policy=MemoryPolicy(), kernel_fit=fit
    )
    assert choice.slots == fit and "the kernel's limits" in choice.reason
    assert refusal(Launch(1, choice.slots, 500, record_full=False), tight) is None
    assert refusal(Launch(1, choice.slots + 1, 500, record_full=False), tight) is not None
    # Shared limits count the workers: 4 workers share the machine's user namespaces.
    few_namespaces = dataclasses.replace(ROOMY, user_namespaces=100)
    assert kernel_slots_that_fit(Launch(4, 1, 500), few_namespaces) == 25
    assert kernel_slots_that_fit(Launch(1, 1, 500), few_namespaces) == 100


def test_dedicated_takes_what_memory_holds_per_worker() -> None:
    policy = MemoryPolicy()  # 10% kept free: 22,000 - 2,400 = 19,600 MB usable
    usable = BIG.available_mb - policy.margin * BIG.total_mb
    two_firsts = 2 * FIRST_SIMULATOR_MB
    expected_live = 2 + int((usable - two_firsts) // FURTHER_SIMULATOR_MB)
    choice = choose_slots(
        holding="dedicated", workers=2, cases=500, policy=policy, kernel_fit=None, memory=BIG
    )
    assert choice.slots == -(-expected_live // 2)
    assert f"memory for about {expected_live} simulator(s)" in choice.reason
    capped = MemoryPolicy(max_memory_mb=FIRST_SIMULATOR_MB + 3 * FURTHER_SIMULATOR_MB)
    small = choose_slots(
        holding="dedicated", workers=1, cases=500, policy=capped, kernel_fit=None, memory=BIG
    )
    assert small.slots == 4
    starved = MachineMemory(total_mb=24_000.0, available_mb=2_000.0)  # under the margin
    none = choose_slots(
        holding="dedicated", workers=1, cases=500, policy=policy, kernel_fit=None, memory=starved
    )
    assert none.slots == 1  # one episode always runs


@pytest.mark.parametrize("given", [None, "auto"])
def test_launch_prints_its_choice_and_checks_the_kernel_with_it(
    tmp_path: Path, mailbox_root: Path, given: str | None
) -> None:
    """Under a hard limit of 200 descriptors, `auto` chooses 18 slots (not the plan's
    24, which `--slots 24` is refused for) and the launch goes on to the run's lock,
    held here by another launch: exit 5 before anything starts."""
    plan = cli_plan(
        tmp_path / "plan.json",
        "task_coverage",
        *("--suite", "libero_10", "--task-ids", "0,1,2,3", "--init-states", "0,1,2,3,4,5"),
    )
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    command = launch_command(plan, run_dir, mailbox_root, "{python} -c pass", "--record", "minimal")
    if given is not None:
        command += ["--slots", given]
    fd = os.open(run_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        proc = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "COLUMNS": "400"},
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200)),
        )
    finally:
        os.close(fd)
    stderr = " ".join(proc.stderr.split())
    assert proc.returncode == 5, proc.stderr[-2000:]
    assert "--slots auto: 15 per worker (the kernel's limits)" in stderr  # (200 - 15) // 12
    assert "live episodes: at most 15 (1 worker(s) x 15 slot(s)), parked" in stderr
    assert "Traceback" not in proc.stderr
    assert list(mailbox_root.iterdir()) == []  # no endpoint made


def test_a_slots_value_that_is_neither_a_count_nor_auto_is_a_usage_error(
    tmp_path: Path, mailbox_root: Path
) -> None:
    plan = cli_plan(
        tmp_path / "plan.json", "task_coverage", "--suite", "libero_10", "--task-ids", "0"
    )
    for bad in ("0", "-3", "many", "2.5"):
        command = launch_command(plan, tmp_path / "run", mailbox_root, "{python} -c pass")
        proc = subprocess.run(
            [*command, "--slots", bad], capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 2, proc.stderr
        assert "neither a count of at least 1 nor 'auto'" in " ".join(proc.stderr.split())
        assert not (tmp_path / "run").exists()


def test_auto_on_ray_is_the_most_slots_the_nodes_still_place() -> None:
    """Each node places workers by its `mailroom_slot` resources and its memory."""
    two = [
        NodeCapacity("a", "10.0.0.1", 64.0, 16_000.0),
        NodeCapacity("b", "10.0.0.2", 8.0, 8_000.0),
    ]
    # Two workers: both fit on the larger node at 32 slots each (64 slots, and 2 x
    # 5,148 MB of its 16 GB); at 33 it places one and the smaller node none.
    assert widest_slots(two, 2, "parked", 256) == 32
    assert widest_slots(two[1:], 1, "parked", 256) == 8  # the smaller node alone
    # One worker: the larger node, by memory (2,100 + 1,000 + 64 per parked episode).
    one = widest_slots(two, 1, "parked", 256)
    assert one == 64 and worker_memory_mb(64, "parked") <= 16_000.0
    assert widest_slots(two, 1, "parked", 10) == 10  # never past the cap
    # Dedicated: a simulator per slot, so memory binds first (2,100 + 1,000 each further).
    dedicated = widest_slots(two, 1, "dedicated", 256)
    assert worker_memory_mb(dedicated, "dedicated") <= 16_000.0
    assert worker_memory_mb(dedicated + 1, "dedicated") > 16_000.0
    # Three workers do not fit even at one slot each with 16 GB of Ray memory: 1, and
    # the launch's check says why.
    assert widest_slots([NodeCapacity("c", "10.0.0.3", 2.0, 16_000.0)], 3, "parked", 256) == 1


def test_one_decision_on_this_machine_chooses_then_checks_against_the_same_limits() -> None:
    tight = dataclasses.replace(ROOMY, open_files=200, open_files_hard=200)
    auto = CapacityRequest(workers=1, slots="auto", holding="parked", cases=500)
    decided = decide_capacity(auto, limits=tight, machine=BIG)
    assert decided.slots == (200 - WORKER_BASE_FDS) // 14 and decided.nodes == ()
    assert decided.choice is not None and "the kernel's limits" in decided.choice.reason
    assert decided.estimate is not None and decided.memory_unknown is None
    given = dataclasses.replace(auto, slots=decided.slots + 1)
    with pytest.raises(KernelLimitsRefusal, match="use at most --slots 13 per worker"):
        decide_capacity(given, limits=tight, machine=BIG)
    named = decide_capacity(dataclasses.replace(auto, slots=4), limits=tight, machine=BIG)
    assert named.slots == 4 and named.choice is None


def test_one_decision_on_a_cluster_takes_its_nodes_and_never_reads_this_machine() -> None:
    nodes = [NodeCapacity("a", "10.0.0.1", 64.0, 16_000.0)]
    auto = CapacityRequest(workers=2, slots="auto", holding="parked", cases=500)
    decided = decide_capacity(auto, nodes=nodes)
    assert decided.slots == 32 and decided.nodes == tuple(nodes) and decided.choice is None
    few = decide_capacity(dataclasses.replace(auto, cases=3), nodes=nodes)
    assert few.slots == 3  # never past the plan's cases
    with pytest.raises(PlacementRefusal, match=r"places 1 worker\(s\) of 64 slot\(s\), not 3"):
        decide_capacity(dataclasses.replace(auto, workers=3, slots=64), nodes=nodes)
