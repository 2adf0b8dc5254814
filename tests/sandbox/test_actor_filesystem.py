"""The actor's writable space bounded by the kernel (`orchestrator/actors/actor_filesystem.py`).

Real bubblewrap sandboxes started by the real launcher, as root on this machine: a
sandboxed actor's scratch/, /tmp and /dev/shm are one tmpfs of its own with a byte
and an inode limit (the profile's scratch quota), mounted in the actor's own mount
namespace only. A write past either limit fails in the actor, whether the file is
named, unlinked while open, or anywhere of the three; what the actor left is copied
into its endpoint after the stop (no link followed, holes kept); nothing is ever
mounted on the host, nothing stays mounted after a stop or after the worker is killed.
One episode on the real watchdog loop (with the simulator-free fake) shows the
episode goes on as the actor's writes fail.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from mailroom.mailbox.endpoint import Endpoint, create_endpoint
from mailroom.orchestrator.actors.actor_filesystem import (
    ANCHOR,
    KEPT_DEPTH,
    filesystem_record,
    kernel_filesystems,
    source_of,
)
from mailroom.orchestrator.actors.confinement import ConfinementSettings
from mailroom.orchestrator.actors.launcher import ProcessLauncher, process_launcher
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.catalog.cases import Case
from mailroom.orchestrator.episode.blinded import run_blinded_episode
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.records.layout import AttemptPaths
from mailroom.orchestrator.sim.fake import FakeSimulator
from recorded_events import episode_events

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="mounting an actor's tmpfs needs root (these machines have it)"
)

WAIT_S = 60.0  # generous: the bound of a wait for an event, never a timing guess
LIMITS = ActorLimits(scratch_quota_mb=8, scratch_quota_files=200)


def _launcher(mailbox_root: Path, tmp_path: Path, script: str, **limits: Any) -> ProcessLauncher:
    return process_launcher(
        ["{python}", "-c", textwrap.dedent(script)],
        LIMITS.model_copy(update=limits),
        confinement=ConfinementSettings(mode="sandbox"),
        run_dir=tmp_path / "run",
        mailbox_root=mailbox_root,
    )


def _run(
    launcher: ProcessLauncher, mailbox_root: Path, tmp_path: Path
) -> tuple[Endpoint, dict[str, Any], dict[str, Any]]:
    """One actor on a fresh endpoint, run to its end and stopped."""
    identity = launcher.identity()
    endpoint = create_endpoint(mailbox_root, actor_gid=identity.gid)
    out = tmp_path / f"evidence-{endpoint.root.name}"
    out.mkdir()
    actor = launcher.start(endpoint, "instructions\n", identity, AttemptPaths(out).actor_output)
    deadline = time.monotonic() + WAIT_S
    while actor.alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not actor.alive(), (out / "actor-stderr.log").read_text()
    described = actor.description()
    filesystem = getattr(actor, "filesystem", None)
    device = None if filesystem is None else filesystem.device
    actor.stop()
    if device is not None:  # the worker let go of it: the kernel frees it
        assert _descriptors_on(device) == []
    return endpoint, described, actor.stop_details()


def _descriptors_on(device: int) -> list[str]:
    """This process's descriptors of files on the filesystem `device`."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.stat(f"/proc/self/fd/{fd}").st_dev == device:
                held.append(fd)
        except OSError:
            continue
    return held


def _mounted_anywhere(worker_pid: int | None = None) -> list[str]:
    """Processes of this machine that still have a tmpfs of the actors of `worker_pid`
    (default: this process) mounted."""
    source = source_of(worker_pid or os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if f" {source} " in (entry / "mountinfo").read_text():
                    found.append(entry.name)
            except OSError:
                continue
    return found


def test_this_machine_bounds_the_actors_space_by_the_kernel() -> None:
    assert kernel_filesystems() is None
    assert ANCHOR.is_dir() and os.listdir(ANCHOR) == []  # the host sees nothing mounted
    assert ANCHOR.stat().st_mode & 0o777 == 0o711


def test_writes_past_the_byte_limit_fail_in_the_actor_wherever_they_go(
    mailbox_root: Path, tmp_path: Path
) -> None:
    """8 MiB shared by scratch/, /tmp and /dev/shm: each big write fails, a file unlinked
    while open too (a sampled check never sees it), and what fits is kept."""
    script = """
        import json, os
        said = {}
        for where in ("big.bin", "/tmp/big.bin", "/dev/shm/big.bin"):
            try:
                with open(where, "wb") as fh:
                    fh.write(b"x" * (12 << 20))
                said[where] = "written"
            except OSError as exc:
                said[where] = exc.strerror
            os.unlink(where)
        hidden = open("/tmp/hidden", "wb")
        os.unlink("/tmp/hidden")
        try:
            hidden.write(b"y" * (12 << 20)); hidden.flush()
            said["unlinked"] = "written"
        except OSError as exc:
            said["unlinked"] = exc.strerror
        hidden.close()
        open("/tmp/kept.txt", "w").write("from tmp")
        open("/dev/shm/kept.txt", "w").write("from shm")
        json.dump(said, open("said.json", "w"))
    """
    endpoint, described, details = _run(
        _launcher(mailbox_root, tmp_path, script), mailbox_root, tmp_path
    )
    said = json.loads((endpoint.scratch / "said.json").read_text())
    assert said == dict.fromkeys(
        ("big.bin", "/tmp/big.bin", "/dev/shm/big.bin", "unlinked"), "No space left on device"
    )
    assert described["filesystem"] == {
        "enforced": "kernel",
        "size_mb": 8,
        "inodes": 200,
        "folders": ["scratch", "/tmp", "/dev/shm"],
    }
    assert (endpoint.root / "tmp" / "kept.txt").read_text() == "from tmp"
    assert (endpoint.root / "dev-shm" / "kept.txt").read_text() == "from shm"
    assert details["filesystem"]["full"] is False  # everything big was unlinked
    assert details["filesystem"]["kept"]["files"] == 3
    assert _mounted_anywhere() == []


def test_entries_past_the_inode_limit_fail_in_the_actor(mailbox_root: Path, tmp_path: Path) -> None:
    script = """
        import os
        made = 0
        try:
            for i in range(1000):
                os.mkdir(("/tmp/d%d" if i % 2 else "/dev/shm/d%d") % i)
                made += 1
        except OSError as exc:
            why = exc.strerror
        try:
            open("count.txt", "w").write(f"{made} {why}")
        except OSError:
            for i in range(made - 1, made - 4, -1):
                os.rmdir(("/tmp/d%d" if i % 2 else "/dev/shm/d%d") % i)
            open("count.txt", "w").write(f"{made} {why}")
    """
    endpoint, _, details = _run(
        _launcher(mailbox_root, tmp_path, script, scratch_quota_files=50),
        mailbox_root,
        tmp_path,
    )
    made, why = (endpoint.scratch / "count.txt").read_text().split(" ", 1)
    assert why == "No space left on device"
    # The endpoint's mount points that bubblewrap makes under /tmp (this test's mailbox
    # root lies there) take a few of the 50.
    assert 40 <= int(made) <= 50
    assert int(made) <= details["filesystem"]["inodes_used"] <= 50


def test_what_the_actor_left_is_kept_without_following_a_link(
    mailbox_root: Path, tmp_path: Path
) -> None:
    deep = KEPT_DEPTH + 5
    script = f"""
        import os
        open("notes.txt", "w").write("plan: move left")
        os.link("notes.txt", "again.txt")  # one inode, two names
        open("/tmp/same-notes.txt", "w").write("plan: move left")
        os.symlink("/etc/shadow", "shadow-link")
        os.symlink("/proc/1/root", "/tmp/root-link")
        os.mkfifo("/tmp/pipe")
        os.mkfifo(b"/tmp/odd-\\xff\\xfe")  # a name that is not UTF-8
        with open("sparse.bin", "wb") as fh:
            fh.truncate(5 << 30)  # 5 GiB long, no byte of it stored
            fh.seek(3 << 30); fh.write(b"middle")
        path = "/dev/shm"
        for i in range({deep}):
            path += "/d"
            os.mkdir(path)
        open(path + "/bottom.txt", "w").write("too deep")
    """
    endpoint, _, details = _run(_launcher(mailbox_root, tmp_path, script), mailbox_root, tmp_path)
    scratch = endpoint.scratch
    assert (scratch / "notes.txt").read_text() == "plan: move left"
    assert (scratch / "again.txt").stat().st_ino == (scratch / "notes.txt").stat().st_ino
    assert (endpoint.root / "tmp" / "same-notes.txt").read_text() == "plan: move left"
    assert os.readlink(scratch / "shadow-link") == "/etc/shadow"  # a link, never its target
    assert os.readlink(endpoint.root / "tmp" / "root-link") == "/proc/1/root"
    assert not (endpoint.root / "tmp" / "pipe").exists()
    sparse = scratch / "sparse.bin"
    assert sparse.stat().st_size == 5 << 30
    assert sparse.stat().st_blocks * 512 < 1 << 20  # its hole stayed a hole
    with sparse.open("rb") as fh:
        fh.seek(3 << 30)
        assert fh.read(6) == b"middle"
    kept = details["filesystem"]
    assert kept["kept"]["bytes"] < 1 << 20
    named = kept["not_kept"]
    assert "tmp/pipe: not a file, folder or link (prw-r--r--)" in named
    assert any(n.startswith("dev-shm/" + "d/" * KEPT_DEPTH + "d: deeper") for n in named)
    assert "tmp/odd-\\xff\\xfe: not a file, folder or link (prw-r--r--)" in named
    assert kept["not_kept_count"] == 3
    json.dumps(details).encode("utf-8")  # strict: no lone surrogate reaches the record
    # Kept for the audit, the evaluator's own: no file of them belongs to the actor's uid.
    kept_files = [p for f in ("scratch", "tmp", "dev-shm") for p in (endpoint.root / f).rglob("*")]
    assert {p.stat(follow_symlinks=False).st_uid for p in kept_files} == {0}


def test_a_wide_tree_is_kept_with_a_few_descriptors(mailbox_root: Path, tmp_path: Path) -> None:
    """3,000 folders side by side, kept by a worker allowed 512 descriptors: the copy
    holds one pair of folders per level, never one per folder still to copy."""
    script = """
        import os
        for i in range(3000):
            os.mkdir(f"wide-{i:04d}")
        open("wide-2999/last.txt", "w").write("end")
    """
    launcher = _launcher(mailbox_root, tmp_path, script, scratch_quota_files=5000)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (512, hard))
    try:
        endpoint, _, details = _run(launcher, mailbox_root, tmp_path)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    kept = details["filesystem"]
    assert kept["kept"]["directories"] >= 3000 and kept["not_kept_count"] == 0, kept
    assert (endpoint.scratch / "wide-2999" / "last.txt").read_text() == "end"


def test_an_unconfined_actor_says_its_space_is_sampled(mailbox_root: Path, tmp_path: Path) -> None:
    launcher = process_launcher(
        [sys.executable, "-c", "open('x', 'w').write('x')"],
        LIMITS,
        confinement=ConfinementSettings(mode="none"),
        run_dir=tmp_path / "run",
        mailbox_root=mailbox_root,
    )
    _, described, details = _run(launcher, mailbox_root, tmp_path)
    assert described["filesystem"] == {
        "enforced": "sampled",
        "reason": "the actor is not sandboxed",
    }
    assert "filesystem" not in details
    assert filesystem_record(None, "not root: mounting a tmpfs needs root") == {
        "enforced": "sampled",
        "reason": "not root: mounting a tmpfs needs root",
    }


def test_a_killed_worker_leaves_nothing_mounted(mailbox_root: Path, tmp_path: Path) -> None:
    """A worker (holding its actors in its pid namespace, as a campaign's do) that
    started a sandboxed actor (which waits, its tmpfs in use) is SIGKILLed: the actor
    dies with it, and no process has its tmpfs any more."""
    program = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from mailroom.mailbox.endpoint import create_endpoint
        from mailroom.orchestrator.actors.confinement import ConfinementSettings
        from mailroom.orchestrator.actors.launcher import process_launcher
        from mailroom.orchestrator.actors.lifetime import hold_children_in_pid_namespace
        from mailroom.orchestrator.actors.limits import ActorLimits
        hold_children_in_pid_namespace()  # as a campaign's worker does
        launcher = process_launcher(
            ["{{python}}", "-c", "open('/tmp/held', 'w').write('x'); open('up', 'w'); "
             "import time; time.sleep(600)"],
            ActorLimits(scratch_quota_mb=8),
            confinement=ConfinementSettings(mode="sandbox"),
            run_dir=Path({str(tmp_path / "run")!r}),
            mailbox_root=Path({str(mailbox_root)!r}),
        )
        identity = launcher.identity()
        endpoint = create_endpoint(Path({str(mailbox_root)!r}), actor_gid=identity.gid)
        actor = launcher.start(endpoint, "instructions\\n", identity, None)
        print(endpoint.root, actor.pid, flush=True)
        time.sleep(600)
        """
    )
    worker = subprocess.Popen(
        [sys.executable, "-c", program], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    try:
        assert worker.stdout is not None
        root, actor_pid = worker.stdout.readline().split()
        deadline = time.monotonic() + WAIT_S
        while not (Path(root) / "inbox").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        # Up: its tmpfs is mounted in its own namespace and nowhere else.
        while _mounted_anywhere(worker.pid) == [] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _mounted_anywhere(worker.pid) != []
        assert "mailroom-actor" not in Path("/proc/self/mountinfo").read_text()
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
        while Path(f"/proc/{actor_pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not Path(f"/proc/{actor_pid}").exists()
        while _mounted_anywhere(worker.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _mounted_anywhere(worker.pid) == []
    finally:
        worker.kill()
        worker.wait()


def test_an_episode_goes_on_while_the_actors_writes_fail(
    mailbox_root: Path, tmp_path: Path
) -> None:
    """On the real loop: an actor fills its space at each decision and still answers;
    the episode ends by its budget, with no quota error (the kernel bounded it)."""
    script = """
        import json, os, sys, time
        endpoint = sys.argv[1]
        for sequence in range(1, 4):
            obs = os.path.join(endpoint, "outbox", f"obs-{sequence}.json")
            while not os.path.exists(obs):
                time.sleep(0.01)
            observation = json.load(open(obs))
            try:
                open(f"fill-{sequence}.bin", "wb").write(b"z" * (16 << 20))
            except OSError:
                pass
            response = {"schema": "mailroom.response/v1", "decision": "act",
                        "request_id": observation["request_id"],
                        "actions": [[0, 0, 0, 0, 0, 0, -1]]}
            final = os.path.join(endpoint, observation["response_file"])
            tmp = os.path.join(endpoint, "inbox", f".tmp-{sequence}")
            json.dump(response, open(tmp, "w"))
            os.rename(tmp, final)
    """
    launcher = process_launcher(
        ["{python}", "-c", textwrap.dedent(script), "{endpoint}"],
        LIMITS,
        confinement=ConfinementSettings(mode="sandbox"),
        run_dir=tmp_path / "run",
        mailbox_root=mailbox_root,
    )
    case = Case(suite="libero_10", task_index=0, init_state_index=0, seed=3)
    settings = RunSettings(max_policy_calls=3, replan_interval=1, response_timeout_s=60.0)
    result = run_blinded_episode(
        case,
        attempt=1,
        settings=settings,
        adapter=FakeSimulator(control_cap=settings.control_cap(520)),
        run_dir=tmp_path / "run",
        mailbox_root=mailbox_root,
        launch_actor=launcher,
        record="minimal",
        limits=LIMITS,
    )
    assert result.errors == [], result.errors
    assert result.counters.action_decisions == 3
    stopped = episode_events(tmp_path / "run", case.attempt_id(1), "actor_stopped")[0]
    assert stopped["filesystem"]["full"] is True
    assert stopped["filesystem"]["bytes_used"] >= 7 << 20
