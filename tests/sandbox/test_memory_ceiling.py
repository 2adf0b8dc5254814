"""The kernel's memory ceiling per actor: a memory cgroup per episode
(`orchestrator/actors/memory_cgroup.py`).

Real cgroups of this machine (the v1 memory controller, writable by root), real
bubblewrap sandboxes, real endpoints watched by the real loop; the simulator is the
simulator-free fake (these tests are about the actor's memory, not physics). An actor
that takes memory past its ceiling must be ended by the OOM killer of its own cgroup
and its episode typed `memory_limit` from the cgroup's count; the same actor under a
ceiling it fits in, and another episode live beside it, must not be touched.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_plan, copied_actor, launch_command, sandbox_processes_left
from mailroom.mailbox.endpoint import create_endpoint
from mailroom.mailbox.schemas import schema_errors
from mailroom.orchestrator.actors.confinement import ConfinementSettings
from mailroom.orchestrator.actors.launcher import process_launcher
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.actors.memory_cgroup import (
    EPISODE_PREFIX,
    PARENT_VARIABLE,
    Hierarchy,
    enforcement,
    probe,
    sweep_stale,
)
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.cli.launch_preflight import check_memory_ceiling
from mailroom.orchestrator.episode.blinded import run_blinded_episode
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.records.result import EpisodeResult
from mailroom.orchestrator.sim.base import ControlOutcome
from mailroom.orchestrator.sim.fake import FakeSimulator
from recorded_events import episode_events

MEMORY_V1 = Path("/sys/fs/cgroup/memory")
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not (MEMORY_V1 / "memory.limit_in_bytes").is_file(),
    reason="needs root and the v1 memory controller mounted (these machines have both)",
)

SETTINGS = RunSettings(max_policy_calls=4, replan_interval=5, response_timeout_s=60.0)
CONTROL_CAP = SETTINGS.control_cap(520)  # libero_10's reference horizon
HOG = Case(suite="libero_10", task_index=0, init_state_index=0, seed=1)
POLITE = Case(suite="libero_10", task_index=1, init_state_index=0, seed=2)
WAIT_S = 120.0  # generous: the bound of a wait for an event, never a timing guess


@pytest.fixture(scope="module")
def hierarchy() -> Hierarchy:
    """Where this process's episode cgroups go; enforcement verified, as it must be here."""
    found = enforcement()
    assert found.hierarchy is not None, found.reason
    assert found.hierarchy.version == "v1"
    return found.hierarchy


@pytest.fixture(scope="module")
def memory_actor(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(copied_actor(tmp_path_factory.mktemp("actors"), "memory_actor.py"))


def _own_cgroups(hierarchy: Hierarchy) -> list[str]:
    """Episode cgroups this process made that are still there."""
    mine = f"{EPISODE_PREFIX}{os.getpid()}-"
    return sorted(p.name for p in hierarchy.parent.iterdir() if p.name.startswith(mine))


def _event(run_dir: Path, case: Case, kind: str) -> dict[str, Any]:
    """The first event of `kind` of the case's attempt."""
    return episode_events(run_dir, case.attempt_id(1), kind)[0]


def _episode(
    case: Case,
    tmp_path: Path,
    mailbox_root: Path,
    argv: Sequence[str],
    limits: ActorLimits,
    simulator: FakeSimulator | None = None,
) -> EpisodeResult:
    run_dir = tmp_path / "run"
    launcher = process_launcher(
        ["{python}", *argv],
        limits,
        confinement=ConfinementSettings(mode="sandbox"),
        run_dir=run_dir,
        mailbox_root=mailbox_root,
    )
    result = run_blinded_episode(
        case,
        attempt=1,
        settings=SETTINGS,
        adapter=simulator or FakeSimulator(control_cap=CONTROL_CAP),
        run_dir=run_dir,
        mailbox_root=mailbox_root,
        launch_actor=launcher,
        record="minimal",
        limits=limits,
    )
    assert schema_errors("mailroom.episode_result/v8", result.document()) == []
    return result


def _ended_by_the_kernel(result: EpisodeResult, run_dir: Path, case: Case, ceiling: int) -> None:
    assert (result.outcome, result.termination) == ("error", "policy_error")
    [error] = result.errors
    assert (error.kind, error.code) == ("policy_error", "memory_limit"), error
    assert f"memory ceiling of {ceiling} MiB" in error.message
    assert result.counters.executed_controls == 0  # it never answered
    started = _event(run_dir, case, "actor_started")
    assert started["memory"] == {"ceiling_mb": ceiling, "enforced": True, "by": "cgroup v1"}
    stopped = _event(run_dir, case, "actor_stopped")
    assert stopped["memory"]["oom_kills"] >= 1 and stopped["memory"]["cgroup_removed"]
    assert stopped["memory"]["peak_bytes"] <= ceiling << 20


class GatedSimulator(FakeSimulator):
    """Holds its episode's first control until `gate` is set, and notes then which
    memory cgroup its actor's sandbox is in: the episode stays live meanwhile."""

    def __init__(self, gate: threading.Event, run_dir: Path, case: Case) -> None:
        super().__init__(control_cap=CONTROL_CAP)
        self.gate, self.run_dir, self.case = gate, run_dir, case
        self.cgroup_line: str | None = None

    def step(self, action: Sequence[float], *, observe: bool) -> ControlOutcome:
        if self.cgroup_line is None:
            pid = _event(self.run_dir, self.case, "actor_started")["pid"]
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
            self.cgroup_line = next(line for line in lines if ":memory:" in line)
            if not self.gate.wait(WAIT_S):
                raise TimeoutError("the other episode did not end")
        return super().step(action, observe=observe)


def test_an_actor_past_its_ceiling_is_ended_by_the_kernel_while_another_completes(
    hierarchy: Hierarchy, memory_actor: str, tmp_path: Path, mailbox_root: Path
) -> None:
    # Two live episodes, each actor under a ceiling of 64 MiB: one takes 512 MiB of
    # heap after its first observation, the other answers. The second is held live (its
    # first control waits) until the first has its result.
    limits = ActorLimits(memory_mb=64)
    run_dir = tmp_path / "run"
    hog_done = threading.Event()
    hog: list[EpisodeResult | BaseException] = []

    def run_hog() -> None:
        try:
            hog.append(
                _episode(
                    HOG, tmp_path, mailbox_root, [memory_actor, "{endpoint}", "heap", "512"], limits
                )
            )
        except BaseException as exc:  # reported by the test below
            hog.append(exc)
        finally:
            hog_done.set()

    gated = GatedSimulator(hog_done, run_dir, POLITE)
    thread = threading.Thread(target=run_hog)
    thread.start()
    polite = _episode(
        POLITE, tmp_path, mailbox_root, [memory_actor, "{endpoint}", "polite", "0"], limits, gated
    )
    thread.join(WAIT_S)
    assert not thread.is_alive()
    [hog_result] = hog
    assert isinstance(hog_result, EpisodeResult), hog_result
    _ended_by_the_kernel(hog_result, run_dir, HOG, 64)
    # The other episode: untouched, its actor in a cgroup of its own below this
    # process's, which saw no OOM kill.
    assert (polite.outcome, polite.termination) == ("failure", "actor_stop")
    assert polite.errors == [] and polite.counters.policy_calls == 3
    assert gated.cgroup_line is not None
    own = hierarchy.parent.relative_to(MEMORY_V1)
    assert f":memory:/{own}/{EPISODE_PREFIX}{os.getpid()}-" in gated.cgroup_line
    stopped = _event(run_dir, POLITE, "actor_stopped")
    assert stopped["memory"]["oom_kills"] == 0 and stopped["memory"]["cgroup_removed"]
    # Both cgroups are gone, and so is every process of both sandboxes.
    assert _own_cgroups(hierarchy) == []
    assert sandbox_processes_left(run_dir) == []


@pytest.mark.parametrize(
    ("mode", "amount", "ceiling", "ended"),
    [("shm", 256, 64, True), ("shm", 32, 128, False), ("files", 400_000, 64, True)],
    ids=["bytes_past", "bytes_within", "empty_files_past"],
)
def test_the_sandboxes_dev_shm_counts_against_the_ceiling(
    hierarchy: Hierarchy,
    memory_actor: str,
    tmp_path: Path,
    mailbox_root: Path,
    mode: str,
    amount: int,
    ceiling: int,
    ended: bool,
) -> None:
    # /dev/shm is a tmpfs of the sandbox, as large as the scratch quota (1 GiB here),
    # with no bound on its files: what the actor writes there (MiB of bytes, or empty
    # files, whose inodes and directory entries are kernel memory) is charged to its
    # cgroup.
    limits = ActorLimits(memory_mb=ceiling)
    argv = [memory_actor, "{endpoint}", mode, str(amount)]
    result = _episode(HOG, tmp_path, mailbox_root, argv, limits)
    run_dir = tmp_path / "run"
    took = list(mailbox_root.glob("*/scratch/took.txt"))
    if ended:
        _ended_by_the_kernel(result, run_dir, HOG, ceiling)
        assert took == []  # it never held it all
    else:  # the control: the same writes within the ceiling
        assert (result.termination, result.errors) == ("actor_stop", [])
        assert [p.read_text() for p in took] == [f"{mode} {amount} 0"]
        stopped = _event(run_dir, HOG, "actor_stopped")
        assert stopped["memory"]["oom_kills"] == 0
        assert stopped["memory"]["peak_bytes"] >= amount << 20
    assert _own_cgroups(hierarchy) == []
    assert sandbox_processes_left(run_dir) == []


def test_enforcement_is_verified_by_a_probe_that_must_be_killed(hierarchy: Hierarchy) -> None:
    verified = enforcement()
    assert verified.enforced and "ended by its OOM killer" in verified.reason
    assert enforcement() is verified  # once per process
    # A hierarchy that accepted the limit without enforcing it looks like this probe,
    # which stays within its limit and lives: it is not taken for enforcement.
    problem = probe(hierarchy, limit_mb=64, allocate_mb=8)
    assert problem is not None and "accepted but not enforced" in problem
    assert "ended with status 0 after 0 OOM kill(s)" in problem


def test_empty_cgroups_of_gone_processes_are_swept(hierarchy: Hierarchy) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = hierarchy.parent / f"{EPISODE_PREFIX}{gone.pid}-000000000000"
    live = hierarchy.parent / f"{EPISODE_PREFIX}{os.getpid()}-000000000000"
    stale.mkdir()
    live.mkdir()
    try:
        sweep_stale(hierarchy)
        assert not stale.exists() and live.exists()
    finally:
        for folder in (stale, live):
            if folder.exists():
                folder.rmdir()


@pytest.fixture
def no_hierarchy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cgroup root that is no memory cgroup: nothing can be enforced there."""
    folder = tmp_path / "not-a-cgroup"
    folder.mkdir()
    monkeypatch.setenv(PARENT_VARIABLE, str(folder))
    yield folder


def test_where_no_hierarchy_is_usable_the_actor_runs_and_its_record_says_why(
    no_hierarchy: Path, tmp_path: Path, mailbox_root: Path
) -> None:
    assert not enforcement().enforced
    launcher = process_launcher(
        ["{python}", "-c", "pass"],
        ActorLimits(memory_mb=64),
        confinement=ConfinementSettings(mode="sandbox"),
        run_dir=tmp_path / "run",
        mailbox_root=mailbox_root,
    )
    identity = launcher.identity()
    endpoint = create_endpoint(mailbox_root, actor_gid=identity.gid)
    actor = launcher.start(endpoint, "the instructions\n", identity, None)
    try:
        memory = actor.description()["memory"]
    finally:
        actor.stop()
    assert memory == {
        "ceiling_mb": 64,
        "enforced": False,
        "reason": f"{no_hierarchy} is not a memory cgroup (neither memory.limit_in_bytes "
        "nor cgroup.controllers)",
    }
    assert "memory" not in actor.stop_details()
    assert list(no_hierarchy.iterdir()) == []  # nothing was made there


def test_a_launch_says_on_stderr_when_the_ceiling_is_not_enforced(
    no_hierarchy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    check_memory_ceiling(2048, spawns_actors=True, required=False, executor="local")
    said = " ".join(capsys.readouterr().err.split())
    assert said.startswith("memory not enforced:") and "is not a memory cgroup" in said
    assert "--require-memory-limit refuses instead" in said


def test_require_memory_limit_refuses_before_anything_starts(
    no_hierarchy: Path, tmp_path: Path, mailbox_root: Path
) -> None:
    plan = cli_plan(
        tmp_path / "plan.json", "task_coverage", "--suite", "libero_10", "--task-ids", "0"
    )
    run_dir = tmp_path / "run"
    command = launch_command(
        plan, run_dir, mailbox_root, "{python} -c pass", "--require-memory-limit"
    )
    proc = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, PARENT_VARIABLE: str(no_hierarchy), "COLUMNS": "400"},
    )
    assert proc.returncode == 2, proc.stderr
    said = " ".join(proc.stderr.split())
    assert "refused: --require-memory-limit:" in said and "is not a memory cgroup" in said
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert not run_dir.exists()  # nothing written
    assert list(mailbox_root.iterdir()) == []  # no endpoint made
