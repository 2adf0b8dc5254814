"""Sandbox uids reserved across processes: never two live holders of one uid.

Real processes (spawned like a campaign's workers, each with threads of its own) reserve
and release uids of a deliberately tiny range at once; each writes down when it held
which uid, and no two of those intervals on one uid may overlap. A holder SIGKILLed
while holding frees its uid, and what it left running as that uid is ended before the
next holder gets it. A real sandbox keeps its uid reserved until its stop is done.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing as mp
import os
import random
import signal
import subprocess
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

import pytest
from mailroom.mailbox.endpoint import create_endpoint
from mailroom.orchestrator.actors.confinement import ConfinementSettings
from mailroom.orchestrator.actors.launcher import process_launcher
from mailroom.orchestrator.actors.outer_identity import (
    OUTER_ID_BASE,
    OUTER_ID_SPAN,
    OuterIdentity,
    leftover_processes,
)
from mailroom.orchestrator.actors.uid_reservation import (
    RESERVATIONS,
    UidRangeExhaustedError,
    UidReservationError,
    reserve_uid,
)

# Just beyond the range real sandboxes draw from: a test's sweep never meets a real one.
TEST_BASE = OUTER_ID_BASE + OUTER_ID_SPAN
WORKERS = 4
THREADS = 2
HOLDS = 120
SPAN = 3  # 8 holders at once on 3 uids

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root changes user")


def _always_clear(uid: int) -> bool:
    return True


def _holder(directory: str, out: str, seed: int) -> None:
    """A worker: THREADS threads, each reserving HOLDS times; intervals written to `out`."""
    rng = random.Random(seed)
    intervals: list[tuple[int, int, int, str]] = []
    exhausted = [0]
    lock = threading.Lock()

    def hold(name: str) -> None:
        done = 0
        while done < HOLDS:
            try:
                held = reserve_uid(TEST_BASE, SPAN, clear=_always_clear, directory=Path(directory))
            except UidRangeExhaustedError:
                with lock:
                    exhausted[0] += 1
                time.sleep(0.0005)
                continue
            start = time.monotonic_ns()
            time.sleep(rng.random() * 0.002)
            end = time.monotonic_ns()
            held.release()
            with lock:
                intervals.append((held.uid, start, end, name))
            done += 1

    threads = [threading.Thread(target=hold, args=(f"{os.getpid()}/{i}",)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    Path(out).write_text(json.dumps({"intervals": intervals, "exhausted": exhausted[0]}))


def test_concurrent_holders_in_four_processes_never_hold_one_uid_at_once(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    outs = [tmp_path / f"holder-{i}.json" for i in range(WORKERS)]
    procs = [
        ctx.Process(target=_holder, args=(str(tmp_path / "uids"), str(out), i))
        for i, out in enumerate(outs)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=300)
    assert [proc.exitcode for proc in procs] == [0] * WORKERS
    intervals: list[tuple[int, int, int, str]] = []
    for out in outs:
        written = json.loads(out.read_text())["intervals"]
        intervals += [(int(u), int(s), int(e), str(n)) for u, s, e, n in written]
    assert len(intervals) == WORKERS * THREADS * HOLDS
    by_uid: dict[int, list[tuple[int, int, int, str]]] = {}
    for interval in intervals:
        by_uid.setdefault(interval[0], []).append(interval)
    assert set(by_uid) <= set(range(TEST_BASE, TEST_BASE + SPAN))
    for uid, held in by_uid.items():
        held.sort(key=lambda i: i[1])
        for before, after in itertools.pairwise(held):
            assert after[1] > before[2], f"uid {uid} held twice at once: {before} and {after}"
        # Every uid went from process to process: exclusion between processes was used.
        assert len({name.split("/")[0] for *_, name in held}) >= 2


def _hold_and_report(directory: str, conn: Connection, survivor: bool) -> None:
    """Reserve the one uid, optionally leave a process of it running, say so, wait."""
    if survivor:
        identity = OuterIdentity.fresh(reservations=Path(directory), base=TEST_BASE, span=1)
        sleeper = subprocess.Popen(
            ["sleep", "600"],
            user=identity.uid,
            group=identity.gid,
            extra_groups=[],
            start_new_session=True,
        )
        conn.send((identity.uid, sleeper.pid))
    else:
        held = reserve_uid(TEST_BASE, 1, clear=_always_clear, directory=Path(directory))
        conn.send((held.uid, None))
    time.sleep(600)


def _killed_holder(directory: Path, survivor: bool) -> tuple[int, int | None]:
    """A spawned process that holds TEST_BASE, SIGKILLed while holding it."""
    ctx = mp.get_context("spawn")
    mine, theirs = ctx.Pipe()
    proc = ctx.Process(target=_hold_and_report, args=(str(directory), theirs, survivor))
    proc.start()
    try:
        assert mine.poll(60), "the holder did not report"
        uid, pid = mine.recv()
        assert uid == TEST_BASE
        with pytest.raises(UidRangeExhaustedError):  # held while it lives
            reserve_uid(TEST_BASE, 1, clear=_always_clear, directory=directory)
    finally:
        proc.kill()  # SIGKILL
        proc.join(timeout=60)
    assert proc.exitcode == -signal.SIGKILL
    return uid, pid


def test_a_holder_killed_while_holding_frees_its_uid(tmp_path: Path) -> None:
    _killed_holder(tmp_path / "uids", survivor=False)
    held = reserve_uid(TEST_BASE, 1, clear=_always_clear, directory=tmp_path / "uids")
    assert held.uid == TEST_BASE and held.held
    held.release()
    assert not held.held


@as_root
def test_what_a_killed_holder_left_running_is_ended_before_its_uid_is_handed_out(
    tmp_path: Path,
) -> None:
    uid, sleeper = _killed_holder(tmp_path / "uids", survivor=True)
    assert sleeper is not None
    try:
        assert leftover_processes(uid) == [sleeper]  # it outlived its holder
        identity = OuterIdentity.fresh(reservations=tmp_path / "uids", base=TEST_BASE, span=1)
        assert identity.uid == uid
        assert leftover_processes(uid) == []
        identity.release()
    finally:
        if leftover_processes(uid):
            os.kill(sleeper, signal.SIGKILL)


def test_an_exhausted_range_is_a_typed_error_until_a_uid_is_given_back(tmp_path: Path) -> None:
    directory = tmp_path / "uids"
    first = reserve_uid(TEST_BASE, 2, clear=_always_clear, directory=directory)
    second = reserve_uid(TEST_BASE, 2, clear=_always_clear, directory=directory)
    assert {first.uid, second.uid} == {TEST_BASE, TEST_BASE + 1}  # one process, two uids
    with pytest.raises(UidRangeExhaustedError, match="no sandbox uid is free: all 2 tried"):
        reserve_uid(TEST_BASE, 2, clear=_always_clear, directory=directory)
    first.release()
    first.release()  # again: harmless, and gives back nothing of another holder
    again = reserve_uid(TEST_BASE, 2, clear=_always_clear, directory=directory)
    assert again.uid == first.uid
    again.release()
    second.release()


def test_a_uid_that_cannot_be_cleared_is_passed_over(tmp_path: Path) -> None:
    stuck = TEST_BASE + 1
    held = reserve_uid(TEST_BASE, 2, clear=lambda uid: uid != stuck, directory=tmp_path)
    assert held.uid == TEST_BASE
    with pytest.raises(UidRangeExhaustedError):
        reserve_uid(TEST_BASE, 2, clear=lambda uid: uid != stuck, directory=tmp_path)
    held.release()


@as_root
def test_a_reservation_folder_not_private_to_this_user_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "others"
    other.mkdir()
    os.chown(other, 4321, 4321)
    with pytest.raises(UidReservationError, match="not a folder private to this user"):
        reserve_uid(TEST_BASE, 1, clear=_always_clear, directory=other)
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(UidReservationError):
        reserve_uid(TEST_BASE, 1, clear=_always_clear, directory=link)


def _try_uid(uid: int, conn: Connection) -> None:
    try:
        held = reserve_uid(uid, 1, clear=_always_clear, directory=RESERVATIONS)
    except UidRangeExhaustedError:
        conn.send("held elsewhere")
        return
    held.release()
    conn.send("free")


def _ask_another_process(uid: int) -> str:
    ctx = mp.get_context("spawn")
    mine, theirs = ctx.Pipe()
    proc = ctx.Process(target=_try_uid, args=(uid, theirs))
    proc.start()
    proc.join(timeout=60)
    assert proc.exitcode == 0 and mine.poll(1)
    answer = mine.recv()
    assert isinstance(answer, str)
    return answer


@as_root
def test_a_real_sandbox_keeps_its_uid_reserved_until_its_stop_is_done(
    mailbox_root: Path, tmp_path: Path
) -> None:
    launcher = process_launcher(
        ["{python}", "-c", "import time; time.sleep(60)"],
        confinement=ConfinementSettings(mode="sandbox"),
        run_dir=tmp_path / "run",
        mailbox_root=mailbox_root,
    )
    identity = launcher.identity()
    assert identity.uid is not None and identity.reservation is not None
    endpoint = create_endpoint(mailbox_root, actor_gid=identity.gid)
    actor = launcher.start(endpoint, "", identity, None)
    try:
        assert actor.alive()
        assert identity.reservation.held
        assert _ask_another_process(identity.uid) == "held elsewhere"
    finally:
        actor.stop(exit_window_s=0.0)
        endpoint.held.close()
    assert not identity.reservation.held
    assert leftover_processes(identity.uid) == []
    assert _ask_another_process(identity.uid) == "free"


def test_a_process_holds_one_descriptor_for_all_its_reservations(tmp_path: Path) -> None:
    """What `campaign/capacity/kernel.py` counts: one per worker, none per episode."""

    def open_descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    before = open_descriptors()
    held = [reserve_uid(TEST_BASE, 100, clear=_always_clear, directory=tmp_path) for _ in range(50)]
    assert len({h.uid for h in held}) == 50
    assert open_descriptors() == before + 1
    for h in held:
        h.release()
    assert open_descriptors() == before + 1  # kept for the next reservation
