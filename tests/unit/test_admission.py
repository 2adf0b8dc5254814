"""Admission by memory: pure arithmetic on given figures, and /proc/meminfo as written."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.campaign.capacity.actor_memory import (
    HEADROOM,
    LEARN_AFTER,
    SMALL_ACTOR_MB,
    ActorShare,
    ActorsNow,
)
from mailroom.orchestrator.campaign.capacity.memory import (
    FIRST_SIMULATOR_MB,
    FURTHER_SIMULATOR_MB,
    Admission,
    MachineMemory,
    MemoryPolicy,
    MemoryUnknownError,
    capacity,
    machine_memory,
)
from mailroom.orchestrator.cli.launch_options import parse_memory_size

GIB = 1024.0


def test_meminfo_is_read_in_mebibytes(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24576000 kB\nMemFree: 1 kB\nMemAvailable:   12288000 kB\n")
    assert machine_memory(meminfo) == MachineMemory(24000.0, 12000.0)
    meminfo.write_text("MemTotal: 1 kB\n")
    with pytest.raises(MemoryUnknownError):
        machine_memory(meminfo)
    with pytest.raises(MemoryUnknownError):
        machine_memory(tmp_path / "absent")


def test_capacity_counts_each_workers_first_simulator_then_further_ones() -> None:
    memory = MachineMemory(total_mb=24 * GIB, available_mb=23 * GIB)
    usable = 23 * GIB - 0.1 * 24 * GIB
    fits = capacity(MemoryPolicy(), workers=2, slots=16, memory=memory)
    expected = 2 + int((usable - 2 * FIRST_SIMULATOR_MB) // FURTHER_SIMULATOR_MB)
    assert fits.live_episodes == expected
    assert fits.usable_mb == pytest.approx(usable)
    # Never more than the slots allow; a cap lowers it.
    assert capacity(MemoryPolicy(), workers=2, slots=3, memory=memory).live_episodes == 6
    capped = capacity(MemoryPolicy(max_memory_mb=4 * GIB), workers=1, slots=16, memory=memory)
    assert capped.live_episodes == 1 + int((4 * GIB - FIRST_SIMULATOR_MB) // FURTHER_SIMULATOR_MB)
    # A machine short of memory for even one simulator holds none.
    poor = MachineMemory(total_mb=4 * GIB, available_mb=1 * GIB)
    assert capacity(MemoryPolicy(), workers=1, slots=4, memory=poor).live_episodes == 0


def test_a_new_simulator_is_admitted_only_above_the_margin_and_within_the_share() -> None:
    admission = Admission(MemoryPolicy(margin=0.10))
    total = 24 * GIB
    margin = 0.10 * total
    need = FURTHER_SIMULATOR_MB
    just_enough = MachineMemory(total, margin + need)
    short = MachineMemory(total, margin + need - 1)
    assert admission.admits_new_simulator(1, 3000.0, just_enough)
    assert not admission.admits_new_simulator(1, 3000.0, short)
    # The first simulator of a worker is estimated at its own (larger) cost.
    assert not admission.admits_new_simulator(0, 0.0, just_enough)
    # A cap of 8 GiB over two workers: each keeps to 4 GiB.
    capped = Admission(MemoryPolicy(max_memory_mb=8 * GIB), workers=2)
    plenty = MachineMemory(total, 20 * GIB)
    assert capped.admits_new_simulator(1, 4 * GIB - need, plenty)
    assert not capped.admits_new_simulator(1, 4 * GIB - need + 1, plenty)


def test_measured_costs_replace_the_estimates() -> None:
    admission = Admission(MemoryPolicy())
    assert admission.estimate_mb(0) == FIRST_SIMULATOR_MB
    assert admission.estimate_mb(3) == FURTHER_SIMULATOR_MB
    admission.record(0, 1500.0)
    for cost in (600.0, 700.0, 650.0):
        admission.record(2, cost)
    admission.record(3, -20.0)  # memory given back meanwhile: never a negative cost
    assert admission.estimate_mb(0) == 1500.0
    assert admission.estimate_mb(4) == 625.0  # median of 600, 700, 650, 0


def test_a_policy_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        MemoryPolicy(margin=1.0)
    with pytest.raises(ValueError):
        MemoryPolicy(max_memory_mb=0)


@pytest.mark.parametrize(
    ("text", "mib"), [("900", 900.0), ("900M", 900.0), ("16G", 16 * GIB), ("1.5GiB", 1.5 * GIB)]
)
def test_memory_sizes_parse(text: str, mib: float) -> None:
    assert parse_memory_size(text) == mib


@pytest.mark.parametrize("text", ["", "G", "-1G", "16T", "lots", "0"])
def test_bad_memory_sizes_are_refused(text: str) -> None:
    with pytest.raises(click.BadParameter):
        parse_memory_size(text)


# Live actors: what they hold (their cgroups) and what each is expected to hold.


def _actors(held: tuple[float, ...], expected: float, known: bool = True) -> ActorsNow:
    return ActorsNow(held, expected, "given", known=known)


def test_live_actors_are_reserved_what_they_do_not_hold_yet() -> None:
    actors = _actors((100.0, 50.0, 250.0), expected=200.0)
    assert actors.reserve_mb == 100.0 + 150.0 + 0.0  # one holds more than expected: 0
    assert actors.total_held_mb == 400.0
    assert _actors((100.0,), expected=200.0, known=False).reserve_mb == 0.0


def test_another_actor_is_admitted_only_if_it_and_the_reserve_fit_above_the_margin() -> None:
    admission = Admission(MemoryPolicy(margin=0.1))
    actors = _actors((100.0, 50.0), expected=200.0)  # reserve 250, need 200
    floor = 0.1 * 20000.0
    assert admission.admits_actor(0.0, MachineMemory(20000.0, floor + 450.0), actors)
    assert not admission.admits_actor(0.0, MachineMemory(20000.0, floor + 449.0), actors)
    # A simulator to build asks for its estimate and the actor's share together.
    memory = MachineMemory(20000.0, floor + 250.0 + 200.0 + FURTHER_SIMULATOR_MB)
    assert admission.admits_new_simulator(1, 0.0, memory, actors)
    assert not admission.admits_new_simulator(1, 0.0, memory, _actors((0.0, 0.0), 200.0))


def test_the_cap_counts_the_workers_actors_and_their_reserve() -> None:
    admission = Admission(MemoryPolicy(max_memory_mb=2000.0), workers=2)  # 1000 each
    plenty = MachineMemory(100000.0, 90000.0)
    actors = _actors((100.0, 50.0), expected=200.0)  # held 150, reserve 250, need 200
    assert admission.admits_actor(400.0, plenty, actors)  # 400 + 150 + 250 + 200 = 1000
    assert not admission.admits_actor(401.0, plenty, actors)


def test_the_share_starts_declared_and_learns_from_the_actors_that_ended() -> None:
    share = ActorShare.declared_in(ActorLimits(expected_memory_mb=300))
    expected, why = share.expected()
    assert share.known and expected == 300.0 and "declared" in why
    share.learn([100 << 20, 120 << 20])
    assert share.expected()[0] == 300.0  # two are not enough to go by
    share.learn([90 << 20])
    expected, why = share.expected()
    assert expected == pytest.approx(120.0 * HEADROOM) and "learned" in why
    undeclared = ActorShare.declared_in(ActorLimits())
    assert not undeclared.known and undeclared.expected()[0] == SMALL_ACTOR_MB
    undeclared.learn([10 << 20] * LEARN_AFTER)
    assert undeclared.known and undeclared.expected()[0] == pytest.approx(10.0 * HEADROOM)
