"""Process-level faults of real actor processes, on the real simulator.

Each case runs one short episode with an actor that misbehaves in one way and asserts
the typed outcome, that nothing executed after the fault, and that no process the
actor started is left running. One simulator is shared by the module.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.cases import Case
from mailroom.orchestrator.episode import process_launcher, run_blinded_episode
from mailroom.orchestrator.libero_adapter import LiberoAdapter
from mailroom.orchestrator.results import EpisodeResult
from mailroom.orchestrator.settings import ActorLimits, RunSettings

pytestmark = pytest.mark.sim

CASE = Case(suite="libero_10", task_index=0, init_state_index=0, seed=20260907)
FAULT_ACTOR = str(REPO / "tests" / "actors" / "fault_actor.py")
SETTINGS = RunSettings(max_policy_calls=4, replan_interval=5, response_timeout_s=4.0)


@pytest.fixture(scope="module")
def adapter() -> Iterator[LiberoAdapter]:
    shared = LiberoAdapter(control_cap=SETTINGS.control_cap(520))
    yield shared
    shared.close()


def _gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


def _run(
    adapter: LiberoAdapter,
    tmp_path: Path,
    mode: str,
    *extra: str,
    limits: ActorLimits | None = None,
) -> tuple[EpisodeResult, Path]:
    launcher = process_launcher([sys.executable, FAULT_ACTOR, "{endpoint}", mode, *extra], limits)
    result = run_blinded_episode(
        CASE,
        attempt=1,
        settings=SETTINGS,
        adapter=adapter,
        run_dir=tmp_path / "run",
        mailbox_root=tmp_path / "mb",
        launch_actor=launcher,
        record="minimal",
        limits=limits,
    )
    assert schema_errors("mailroom.episode_result/v1", result.document()) == []
    c = result.counters
    assert c.policy_calls == c.action_decisions + c.rejected_responses + c.stop_responses
    endpoint = next((tmp_path / "mb").iterdir())
    time.sleep(0.2)
    for pid_file in ("actor.pid", "child.pid"):
        path = endpoint / "scratch" / pid_file
        if path.exists():
            assert _gone(int(path.read_text())), f"{pid_file} outlived its episode"
    return result, endpoint


def _error(result: EpisodeResult) -> tuple[str, str]:
    assert result.outcome == "error" and len(result.errors) == 1
    return result.errors[0].kind, result.errors[0].code


def test_actor_crashing_before_its_first_response(adapter: LiberoAdapter, tmp_path: Path) -> None:
    result, _ = _run(adapter, tmp_path, "crash_before_first")
    assert _error(result) == ("policy_error", "actor_exited")
    assert (result.counters.policy_calls, result.counters.executed_controls) == (0, 0)


def test_actor_crashing_mid_run_keeps_what_ran(adapter: LiberoAdapter, tmp_path: Path) -> None:
    result, _ = _run(adapter, tmp_path, "crash_mid")
    assert _error(result) == ("policy_error", "actor_exited")
    assert (result.counters.policy_calls, result.counters.executed_controls) == (2, 10)


def test_temp_file_never_renamed_is_never_read(adapter: LiberoAdapter, tmp_path: Path) -> None:
    result, endpoint = _run(adapter, tmp_path, "temp_never_renamed")
    assert _error(result) == ("actor_timeout", "response_deadline_missed")
    assert result.counters.policy_calls == 0
    assert (endpoint / "inbox" / ".resp-1.json.tmp").exists()  # left alone, never claimed


def test_hanging_actor_and_its_children_are_ended(adapter: LiberoAdapter, tmp_path: Path) -> None:
    result, endpoint = _run(adapter, tmp_path, "hang_with_child")
    assert _error(result) == ("actor_timeout", "response_deadline_missed")
    assert (endpoint / "scratch" / "child.pid").exists()  # and _run proved it is gone


def test_flooded_inbox_and_scratch_do_not_confuse_the_loop(
    adapter: LiberoAdapter, tmp_path: Path
) -> None:
    result, endpoint = _run(adapter, tmp_path, "flood")
    assert result.outcome == "failure" and result.termination == "actor_stop"
    assert (result.counters.action_decisions, result.counters.stop_responses) == (1, 1)
    assert len(list((endpoint / "inbox").iterdir())) == 3000  # junk left, never claimed


def test_giant_file_is_stopped_by_the_declared_file_size_limit(
    adapter: LiberoAdapter, tmp_path: Path
) -> None:
    limits = ActorLimits(file_size_mb=16, scratch_quota_mb=None, scratch_quota_files=None)
    result, endpoint = _run(adapter, tmp_path, "giant_file", limits=limits)
    assert _error(result) == ("policy_error", "actor_exited")
    assert (endpoint / "scratch" / "giant.bin").stat().st_size <= 16 << 20


def test_scratch_quota_ends_the_episode_before_the_disk_fills(
    adapter: LiberoAdapter, tmp_path: Path
) -> None:
    limits = ActorLimits(scratch_quota_mb=64)
    result, _ = _run(adapter, tmp_path, "sparse_file", limits=limits)
    assert _error(result) == ("policy_error", "scratch_quota_exceeded")
    assert result.counters.executed_controls == 0


def test_outbox_replaced_by_a_symlink_is_never_followed(
    adapter: LiberoAdapter, tmp_path: Path
) -> None:
    sentinel = tmp_path / "elsewhere"
    sentinel.mkdir()
    (sentinel / "keep.txt").write_text("untouched")
    result, _ = _run(adapter, tmp_path, "symlink_outbox", str(sentinel))
    assert _error(result) == ("protocol_error", "endpoint_tampered")
    assert sorted(p.name for p in sentinel.iterdir()) == ["keep.txt"]
    assert (sentinel / "keep.txt").read_text() == "untouched"


def test_hard_link_to_an_orchestrator_file_is_refused(
    adapter: LiberoAdapter, tmp_path: Path
) -> None:
    result, endpoint = _run(adapter, tmp_path, "hardlink_obs")
    assert _error(result) == ("protocol_error", "hard_link")
    assert result.counters.executed_controls == 0
    assert json.loads((endpoint / "outbox" / "obs-1.json").read_text())["sequence"] == 1


def test_permission_change_of_the_endpoint_is_typed(adapter: LiberoAdapter, tmp_path: Path) -> None:
    result, endpoint = _run(adapter, tmp_path, "chmod_outbox")
    assert _error(result) == ("protocol_error", "endpoint_tampered")
    os.chmod(endpoint / "outbox", 0o755)


def test_actor_limits_reach_the_actor_process(adapter: LiberoAdapter, tmp_path: Path) -> None:
    limits = ActorLimits(cpu_seconds=30, file_size_mb=8, open_files=64)
    result, _ = _run(adapter, tmp_path, "crash_mid", limits=limits)
    events = [
        json.loads(line)
        for line in next((tmp_path / "run" / "episodes").iterdir())
        .joinpath("events.jsonl")
        .read_text()
        .splitlines()
    ]
    started: dict[str, Any] = next(e for e in events if e["event"] == "actor_started")
    assert started["limits"]["file_size_mb"] == 8 and started["env"]["HOME"].endswith("scratch")
    assert result.errors[0].code == "actor_exited"
