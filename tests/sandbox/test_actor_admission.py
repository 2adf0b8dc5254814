"""Admission by what actors hold, with real memory cgroups and real sandboxed actors:

- a live actor's memory is read from its own cgroup (what it holds now and its peak),
  and once its cgroup is removed its peak is what the worker learns from;
- a launch whose profile declares each actor to hold more than this machine has runs its
  episodes one at a time (one always runs), where the same launch declaring a small share
  holds them live at once.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from campaign_builders import campaign_request, diagnostic_actor
from conftest import sandbox_processes_left
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.actors.memory_cgroup import (
    ended_actor_peaks,
    enforcement,
    episode_cgroup,
    live_actor_memory,
)
from mailroom.orchestrator.campaign.coordinator import WorkOutcome
from mailroom.orchestrator.campaign.launch import run_campaign
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.families.plans import build_plan
from mailroom.orchestrator.sim.base import ControlOutcome
from mailroom.orchestrator.sim.fake import FakeSimulator
from recorded_events import episode_events

MB = 1 << 20
HOLD_MB = 64
# Allocates and touches HOLD_MB, says so, and waits to be ended.
HOLDER = (
    f"import time; block = bytearray({HOLD_MB} << 20); block[::4096] = b'x' * {HOLD_MB * 256};"
    " print('held', flush=True); time.sleep(120)"
)


def test_a_live_actors_memory_is_read_from_its_cgroup_and_its_peak_learned() -> None:
    assert enforcement().enforced, enforcement().reason  # this machine makes cgroups
    ended_actor_peaks()  # what earlier tests of this process left
    before = live_actor_memory()
    assert before is not None
    cgroup = episode_cgroup(256)
    assert cgroup is not None
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, preexec_fn=cgroup.join
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == b"held\n"
        held = live_actor_memory()
        assert held is not None and len(held) == len(before) + 1
        assert max(held) >= HOLD_MB * MB
        assert ended_actor_peaks() == []  # nothing ended yet
    finally:
        child.kill()
        child.wait()
    cgroup.close_in_parent()
    assert cgroup.remove()
    [peak] = ended_actor_peaks()
    assert peak >= HOLD_MB * MB
    assert len(live_actor_memory() or []) == len(before)


class SlowFakeSimulator(FakeSimulator):
    """Each control takes 0.05 s: an episode lasts long enough for another to start."""

    def step(self, action: Any, *, observe: bool) -> ControlOutcome:
        time.sleep(0.05)
        outcome: ControlOutcome = super().step(action, observe=observe)
        return outcome


def _launch(run_dir: Path, mailbox_root: Path, expected_mb: int) -> list[tuple[float, float]]:
    """Three episodes on three slots, each actor declared to hold `expected_mb`; each
    episode's first observation and end, in start order."""
    run_dir.mkdir(mode=0o700)
    request = campaign_request(
        run_dir,
        mailbox_root,
        plan=build_plan("task_coverage", suite="libero_10", task_ids=[0, 1, 2]),
        actor=diagnostic_actor("--chunks", "6", "--think", "0.3"),
        settings=RunSettings(max_policy_calls=6, replan_interval=5, response_timeout_s=60.0),
        simulator=functools.partial(SlowFakeSimulator),
        slots=3,
    )
    limits = ActorLimits(**{**request.limits.model_dump(), "expected_memory_mb": expected_mb})
    outcome: WorkOutcome = run_campaign(
        dataclasses.replace(request, limits=limits), lambda *_: None, lambda _: None
    )
    assert outcome.lost == [] and outcome.unrecorded == []
    spans = []
    for attempt in sorted(p.name for p in (run_dir / "episodes").iterdir()):
        events = episode_events(run_dir, attempt)
        first = min(e["t"] for e in events if e["event"] == "observation_published")
        end = max(e["t"] for e in events if e["event"] == "episode_finished")
        spans.append((first, end))
    assert sandbox_processes_left(run_dir) == []
    return sorted(spans)


def _overlap(spans: list[tuple[float, float]]) -> bool:
    return any(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans))


def test_a_share_that_does_not_fit_runs_episodes_one_at_a_time(
    tmp_path: Path, mailbox_root: Path
) -> None:
    # Declared: each actor holds 1 TiB at its peak. Nothing admits a second one while
    # one is live; the first always runs.
    alone = _launch(tmp_path / "big", mailbox_root, expected_mb=1 << 20)
    assert len(alone) == 3 and not _overlap(alone), alone
    # The same launch with a small share holds them live at once.
    together = _launch(tmp_path / "small", mailbox_root, expected_mb=8)
    assert len(together) == 3 and _overlap(together), together
