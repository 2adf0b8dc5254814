"""Process-level faults of real actor processes, on the real simulator.

Each case runs one short episode with an actor that misbehaves in one way and asserts
the typed outcome, that nothing executed after the fault, and that no process the
actor started is left running. Actors run in the sandbox (the default) unless a case
tests the orchestrator's own defences against an unconfined actor (`none`), which an
external actor also meets. One simulator is shared by the module.

The response deadline runs from the first observation's publication, while the
sandbox may still be starting: a case whose subject is not the deadline gets a
generous one, and a case that must miss it gets a bound still far beyond any sandbox's
start (a hanging actor must have started its child by then, which is checked).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import copied_actor
from mailroom.benchmarks.libero.adapter import LiberoAdapter
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.actors.confinement import ConfinementSettings
from mailroom.orchestrator.actors.launcher import process_launcher
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.actors.outer_identity import leftover_processes
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.episode.blinded import run_blinded_episode
from mailroom.orchestrator.episode.settings import RecordMode, RunSettings
from mailroom.orchestrator.episode.video import probe_video
from mailroom.orchestrator.records.confinement import ConfinementMode
from mailroom.orchestrator.records.result import EpisodeResult
from recorded_events import attempt_events

CASE = Case(suite="libero_10", task_index=0, init_state_index=0, seed=20260907)
SETTINGS = RunSettings(max_policy_calls=4, replan_interval=5, response_timeout_s=120.0)
# For the cases that must miss the deadline: each takes this long.
MISSED = SETTINGS.model_copy(update={"response_timeout_s": 15.0})


@pytest.fixture(scope="module")
def adapter() -> Iterator[LiberoAdapter]:
    shared = LiberoAdapter(control_cap=SETTINGS.control_cap(520))
    yield shared
    shared.close()


@pytest.fixture(scope="module")
def fault_actor(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(copied_actor(tmp_path_factory.mktemp("actors"), "fault_actor.py"))


@pytest.fixture
def mb(mailbox_root: Path) -> Path:
    return mailbox_root / "mb"


def _gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


def _run(
    adapter: LiberoAdapter,
    tmp_path: Path,
    mb: Path,
    actor: str,
    mode: str,
    *extra: str,
    limits: ActorLimits | None = None,
    confinement: ConfinementMode = "sandbox",
    settings: RunSettings = SETTINGS,
    record: RecordMode = "minimal",
) -> tuple[EpisodeResult, Path]:
    launcher = process_launcher(
        ["{python}", actor, "{endpoint}", mode, *extra],
        limits,
        confinement=ConfinementSettings(mode=confinement),
        run_dir=tmp_path / "run",
        mailbox_root=mb,
    )
    result = run_blinded_episode(
        CASE,
        attempt=1,
        settings=settings,
        adapter=adapter,
        run_dir=tmp_path / "run",
        mailbox_root=mb,
        launch_actor=launcher,
        record=record,
        limits=limits,
    )
    assert schema_errors("mailroom.episode_result/v8", result.document()) == []
    assert result.confinement is not None and result.confinement.mode == confinement
    c = result.counters
    assert c.policy_calls == c.action_decisions + c.rejected_responses + c.stop_responses
    endpoint = next(mb.iterdir())
    events = attempt_events(next((tmp_path / "run" / "episodes").iterdir()))
    started = next(e for e in events if e["event"] == "actor_started")
    stopped = next(e for e in events if e["event"] == "actor_stopped")
    if confinement == "sandbox":
        # Its pid namespace died with it: nothing of its fresh uid was left to kill.
        uid = started["confinement"]["outer_uid"]
        assert stopped["leftover_processes"] == 0
        assert leftover_processes(uid) == []
    else:
        # Every fault actor writes its pid first; a hanging one its child's too.
        pid_files = ["actor.pid"] + (["child.pid"] if mode == "hang_with_child" else [])
        for pid_file in pid_files:
            path = endpoint / "scratch" / pid_file
            assert path.exists(), f"the actor never wrote {pid_file}"
            pid = int(path.read_text())
            deadline = time.monotonic() + 10
            while not _gone(pid) and time.monotonic() < deadline:
                time.sleep(0.02)
            assert _gone(pid), f"{pid_file} outlived its episode"
    return result, endpoint


def _error(result: EpisodeResult) -> tuple[str, str]:
    assert result.outcome == "error" and len(result.errors) == 1
    return result.errors[0].kind, result.errors[0].code


@pytest.mark.parametrize("confinement", ["sandbox", "none"])
def test_actor_crashing_before_its_first_response(
    adapter: LiberoAdapter, tmp_path: Path, mb: Path, fault_actor: str, confinement: ConfinementMode
) -> None:
    result, _ = _run(
        adapter, tmp_path, mb, fault_actor, "crash_before_first", confinement=confinement
    )
    assert _error(result) == ("policy_error", "actor_exited")
    assert (result.counters.policy_calls, result.counters.executed_controls) == (0, 0)


def test_actor_crashing_mid_run_keeps_what_ran(
    adapter: LiberoAdapter, tmp_path: Path, mb: Path, fault_actor: str
) -> None:
    result, _ = _run(adapter, tmp_path, mb, fault_actor, "crash_mid", record="full")
    assert _error(result) == ("policy_error", "actor_exited")
    assert (result.counters.policy_calls, result.counters.executed_controls) == (2, 10)
    # An errored result's evidence adds up too: a step row and a video frame per control.
    attempt = tmp_path / "run" / "episodes" / result.attempt_id
    assert len((attempt / "steps.jsonl").read_text().splitlines()) == 10
    videos = sorted((attempt / "videos").glob("*.mp4"))
    assert [v.name for v in videos] == ["agentview.mp4", "robot0_eye_in_hand.mp4"]
    assert all(probe_video(v).frames == 10 for v in videos)


def test_temp_file_never_renamed_is_never_read(
    adapter: LiberoAdapter, tmp_path: Path, mb: Path, fault_actor: str
) -> None:
    result, endpoint = _run(
        adapter, tmp_path, mb, fault_actor, "temp_never_renamed", settings=MISSED
    )
    assert _error(result) == ("actor_timeout", "response_deadline_missed")
    assert result.counters.policy_calls == 0
    assert (endpoint / "inbox" / ".resp-1.json.tmp").exists()  # left alone, never claimed


@pytest.mark.parametrize("confinement", ["sandbox", "none"])
def test_hanging_actor_and_its_children_are_ended(
    adapter: LiberoAdapter, tmp_path: Path, mb: Path, fault_actor: str, confinement: ConfinementMode
) -> None:
    result, endpoint = _run(
        adapter,
        tmp_path,
        mb,
        fault_actor,
        "hang_with_child",
        confinement=confinement,
        settings=MISSED,
    )
    assert _error(result) == ("actor_timeout", "response_deadline_missed")
    assert (endpoint / "scratch" / "child.pid").exists()  # and _run proved it is gone


def test_flooded_inbox_and_scratch_do_not_confuse_the_loop(
    adapter: LiberoAdapter, tmp_path: Path, mb: Path, fault_actor: str
) -> None:
    result, endpoint = _run(adapter, tmp_path, mb, fault_actor, "flood")
    assert result.outcome == "failure" and result.termination == "actor_stop"
    assert (result.counters.action_decisions, result.counters.stop_responses) == (1, 1)
    assert len(list((endpoint / "inbox").iterdir())) == 3000  # junk left, never claimed


def test_giant_file_is_stopped_by_the_declared_file_size_limit(
    adapter: LiberoAdapter, tmp_path: Path, mb: Path, fault_actor: str
) -> None:
    limits = ActorLimits(file_size_mb=16, scratch_quota_mb=None, scratch_quota_files=None)
    result, endpoint = _run(adapter, tmp_path, mb, fault_actor, "giant_file", limits=limits)
    assert _error(result) == ("policy_error", "actor_exited")
    assert (endpoint / "scratch" / "giant.bin").stat().st_size <= 16 << 20


def test_scratch_quota_ends_the_episode_before_the_disk_fills(
    adapter: LiberoAdapter, tmp_path: Path, mb: Path, fault_actor: str
) -> None:
    # Unconfined: the sampled quota (a sandboxed actor's scratch/ is a tmpfs bounded by
    # the kernel where the orchestrator may mount: tests/sandbox/test_actor_filesystem.py).
    limits = ActorLimits(scratch_quota_mb=64)
    result, _ = _run(
        adapter, tmp_path, mb, fault_actor, "sparse_file", limits=limits, confinement="none"
    )
    assert _error(result) == ("policy_error", "scratch_quota_exceeded")
    assert result.counters.executed_controls == 0


def test_the_scratch_file_count_quota_ends_a_flood(
    adapter: LiberoAdapter, tmp_path: Path, mb: Path, fault_actor: str
) -> None:
    limits = ActorLimits(scratch_quota_files=500)  # the flood makes 6,000 entries
    result, _ = _run(adapter, tmp_path, mb, fault_actor, "flood", limits=limits, confinement="none")
    assert _error(result) == ("policy_error", "scratch_quota_exceeded")
    assert "the profile allows 500 entries" in result.errors[0].message
    assert result.counters.action_decisions <= 1


# Tampering with the endpoint: an unconfined (or external) actor can try it, and the
# orchestrator's own defences type it; inside the sandbox the same moves fail at once
# (the folders are mount points, outbox/ is read-only, links cannot cross mounts).


def test_outbox_replaced_by_a_symlink_is_never_followed(
    adapter: LiberoAdapter, tmp_path: Path, mb: Path, fault_actor: str
) -> None:
    sentinel = tmp_path / "elsewhere"
    sentinel.mkdir()
    (sentinel / "keep.txt").write_text("untouched")
    result, _ = _run(
        adapter, tmp_path, mb, fault_actor, "symlink_outbox", str(sentinel), confinement="none"
    )
    assert _error(result) == ("protocol_error", "endpoint_tampered")
    assert sorted(p.name for p in sentinel.iterdir()) == ["keep.txt"]
    assert (sentinel / "keep.txt").read_text() == "untouched"


def test_hard_link_to_an_orchestrator_file_is_refused(
    adapter: LiberoAdapter, tmp_path: Path, mb: Path, fault_actor: str
) -> None:
    result, endpoint = _run(adapter, tmp_path, mb, fault_actor, "hardlink_obs", confinement="none")
    assert _error(result) == ("protocol_error", "hard_link")
    assert result.counters.executed_controls == 0
    assert json.loads((endpoint / "outbox" / "obs-1.json").read_text())["sequence"] == 1


def test_permission_change_of_the_endpoint_is_typed(
    adapter: LiberoAdapter, tmp_path: Path, mb: Path, fault_actor: str
) -> None:
    result, endpoint = _run(adapter, tmp_path, mb, fault_actor, "chmod_outbox", confinement="none")
    assert _error(result) == ("protocol_error", "endpoint_tampered")
    os.chmod(endpoint / "outbox", 0o755)


@pytest.mark.parametrize(
    ("mode", "failure"),
    [
        ("symlink_outbox", "Read-only file system"),
        ("hardlink_obs", "Invalid cross-device link"),
        ("chmod_outbox", "Read-only file system"),
    ],
)
def test_inside_the_sandbox_tampering_fails_and_leaves_the_endpoint_intact(
    adapter: LiberoAdapter, tmp_path: Path, mb: Path, fault_actor: str, mode: str, failure: str
) -> None:
    result, endpoint = _run(adapter, tmp_path, mb, fault_actor, mode, str(tmp_path))
    assert _error(result) == ("policy_error", "actor_exited")  # its own move failed
    stderr = (next((tmp_path / "run" / "episodes").iterdir()) / "actor-stderr.log").read_text()
    assert failure in stderr
    assert (endpoint / "outbox").is_dir() and not (endpoint / "outbox").is_symlink()
    assert (endpoint / "outbox").stat().st_mode & 0o777 == 0o750
    assert not (endpoint / "inbox" / "resp-1.json").exists()


def test_actor_limits_reach_the_actor_process(
    adapter: LiberoAdapter, tmp_path: Path, mb: Path, fault_actor: str
) -> None:
    limits = ActorLimits(cpu_seconds=30, file_size_mb=8, open_files=64)
    result, endpoint = _run(adapter, tmp_path, mb, fault_actor, "report_limits", limits=limits)
    assert result.errors[0].code == "actor_exited"
    seen = {
        line[:26].strip(): line[26:].split()[:2]
        for line in (endpoint / "scratch" / "limits.txt").read_text().splitlines()[1:]
    }
    assert seen["Max cpu time"] == ["30", "30"]
    assert seen["Max file size"] == [str(8 << 20)] * 2
    assert seen["Max open files"] == ["64", "64"]
