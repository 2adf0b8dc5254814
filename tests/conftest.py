"""Shared test helpers: the repository, the project's executables, leak scanning; and
each test's marker, from its folder.

The tests are laid out by cost, then by room: `unit/` and `contract/` (no simulator, no
sandbox, quick: `make test-fast`), `integration/` (the real `mailroom` command as a
user runs it, a built wheel, heavier work in one process), `sandbox/` (real actors,
sandboxes, launches and the provider gateway), `stress/` (long soaks), `sim/` (the real
LIBERO simulator), `cluster/` (a real local Ray cluster), `browser/` (Debian's
chromium); `support/` holds what they share (test actors, provider stand-ins, the toy
families, older records). A test's marker is its folder's, set here and nowhere else,
so a file's place and its marker cannot disagree."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from actor_copies import standalone_actor
from mailroom.mailbox.endpoint import new_mailbox_root
from mailroom.orchestrator.actors.outer_identity import leftover_processes

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
SUPPORT = TESTS / "support"
# The folders tests live in, each its marker (pyproject.toml declares them).
TEST_FOLDERS = ("unit", "contract", "integration", "sandbox", "stress", "sim", "cluster", "browser")
BIN = Path(sys.executable).parent

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")


def mailroom_exe() -> str:
    return str(BIN / "mailroom")


def launch_command(
    plan: Path, run_dir: Path, mailbox: Path, actor: str, *options: str
) -> list[str]:
    """`mailroom launch` of the diagnostic profile with a 60 s response deadline."""
    return [
        mailroom_exe(),
        "launch",
        str(plan),
        "--profile",
        "scripted_diagnostic",
        "--run-dir",
        str(run_dir),
        "--mailbox-root",
        str(mailbox),
        "--response-timeout",
        "60",
        "--actor",
        actor,
        *options,
    ]


def run_cli(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`mailroom ARGS` as a user runs it, 200 columns wide (rich wraps table cells to the
    terminal's width)."""
    return subprocess.run(
        [mailroom_exe(), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**(os.environ if env is None else env), "COLUMNS": "200"},
    )


def served_url(server: subprocess.Popen[str]) -> str:
    """The address `mailroom view --serve` (started with stderr piped) prints once it serves."""
    assert server.stderr is not None
    while True:
        line = server.stderr.readline()
        assert line, "the server ended before it served"
        if "serving " in line:
            return line.split("serving ", 1)[1].split()[0]


def assert_usage_error(proc: subprocess.CompletedProcess[str], message: str) -> None:
    """Exit 2, the message on stderr, no traceback, nothing on stdout."""
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stdout == ""


def cli_plan(out: Path, kind: str, *options: str) -> Path:
    """`mailroom plan --kind KIND [options] --out OUT`, as a user writes a plan."""
    subprocess.run(
        [mailroom_exe(), "plan", "--kind", kind, *options, "--out", str(out)],
        check=True,
        capture_output=True,
    )
    return out


def files_under(root: Path) -> Iterable[Path]:
    return sorted(root.rglob("*"))


def leaks_under(root: Path, needles: Iterable[str]) -> list[str]:
    """Every (path, needle) where a needle appears in a name or in a file's bytes."""
    found: list[str] = []
    wanted = [n for n in needles if n]
    for path in files_under(root):
        rel = path.relative_to(root).as_posix()
        for needle in wanted:
            if needle.lower() in rel.lower():
                found.append(f"name {rel}: {needle}")
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes().lower()
            for needle in wanted:
                if needle.lower().encode() in data:
                    found.append(f"content {rel}: {needle}")
    return found


# The order files are handed out in when `make test` runs them on several workers: the
# costliest files first, so that no long file starts late and runs alone at the end. First
# the files that cost far more than any other (by their durations in `make test`, the
# costliest first: 3-8 minutes each on three workers here, ruff and mypy about 2), then the
# rest by folder, the costliest folders first.
COSTLIEST_FILES = (
    "cluster/test_cluster_ray_sim.py",
    "sim/test_slots_sim.py",
    "sim/test_parked_identity.py",
    "sim/test_coordinator_sim.py",
    "sim/test_faults_at_scale_sim.py",
    "sim/test_plus_sim.py",
    "sim/test_arm_response_sim.py",
    "sim/test_replay_sim.py",
    "stress/test_live_episodes_at_scale.py",
    "sim/test_kill_resume_soak_sim.py",
    "contract/test_code_checks.py",
)
COST_ORDER = ("sim", "cluster", "stress", "browser", "sandbox", "integration", "contract", "unit")


# `TEST_CPU_LOG=FILE`: each test's CPU seconds appended to FILE as a JSON line (this
# process's and its reaped children's, its setup and teardown included), to find what to
# cut when `make test` grows: the suite is bound by the machine's cores, not by waiting.
CPU_LOG = os.environ.get("TEST_CPU_LOG")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if not CPU_LOG:
        yield
        return
    before, started = os.times(), time.monotonic()
    yield
    after = os.times()
    cpu_s = sum(after[:4]) - sum(before[:4])
    line = {
        "test": item.nodeid,
        "cpu_s": round(cpu_s, 2),
        "wall_s": round(time.monotonic() - started, 2),
    }
    with open(CPU_LOG, "a", encoding="utf-8") as log:
        log.write(json.dumps(line) + "\n")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test is marked with its folder (`-m sim`, `-m "not sandbox"`, ...); the
    costliest folders come first (a stable sort: a file's own order is kept)."""
    for item in items:
        folder = item.path.relative_to(TESTS).parts[0]
        if folder not in TEST_FOLDERS:
            raise pytest.UsageError(f"{item.path}: a test lives in one of {TEST_FOLDERS}")
        item.add_marker(getattr(pytest.mark, folder))
    items.sort(key=_cost_rank)


def _cost_rank(item: pytest.Item) -> int:
    where = item.path.relative_to(TESTS)
    if where.as_posix() in COSTLIEST_FILES:
        return COSTLIEST_FILES.index(where.as_posix())
    return len(COSTLIEST_FILES) + COST_ORDER.index(where.parts[0])


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def mailbox_root() -> Iterator[Path]:
    """A mailbox root a sandbox user can reach (pytest's own folders are owner-only)."""
    root = new_mailbox_root("mailroom-test-")
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def module_mailbox_root() -> Iterator[Path]:
    root = new_mailbox_root("mailroom-test-")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def actor_started_events(run_dir: Path) -> list[dict[str, Any]]:
    """Every attempt's `actor_started` record, in attempt order."""
    found = []
    for log in sorted(run_dir.glob("episodes/*/events.jsonl")):
        for line in log.read_text().splitlines():
            if '"actor_started"' in line:
                found.append(json.loads(line))
    return found


def worker_processes(coordinator_pid: int) -> list[int]:
    """A launch's worker processes: its children started by multiprocessing's spawn."""
    path = Path(f"/proc/{coordinator_pid}/task/{coordinator_pid}/children")
    children = [int(x) for x in path.read_text().split()] if path.exists() else []
    found = []
    for pid in children:
        try:
            if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def sandbox_processes_left(run_dir: Path, timeout_s: float = 10.0) -> list[int]:
    """Processes still alive of any sandbox user this run started, once they had
    `timeout_s` to end (an empty list as soon as none is left)."""
    uids = [e["confinement"]["outer_uid"] for e in actor_started_events(run_dir)]
    assert uids and all(isinstance(u, int) for u in uids), "no sandboxed actor was started"
    deadline = time.monotonic() + timeout_s
    while True:
        left = [pid for uid in uids for pid in leftover_processes(uid)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def kill_sandbox_user(uid: int) -> int:
    """SIGKILL every process of one sandbox's user; how many were signalled. Killing one
    can take the others with it (bubblewrap's processes die with their parent), so a
    process gone by its turn is passed over."""
    killed = 0
    for pid in leftover_processes(uid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        killed += 1
    assert killed >= 1, f"no process of sandbox user {uid} was alive to kill"
    return killed


def copied_actor(directory: Path, name: str) -> Path:
    """A test actor copied out of the project: an actor never sees the project. The copy
    stands alone (support/actor_copies.py): a sandbox is handed the actor's file alone,
    so the mailbox loop the actors share is written into it in place of its import."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / name
    target.write_bytes(standalone_actor(SUPPORT / "actors" / name))
    return target
