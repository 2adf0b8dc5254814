"""The cluster executor's pure parts, without Ray: evidence sent file by file and
written on the driver (the result last, names checked), the staging folder's lock and
sweep, a disclosure that waits for the driver's record, and a worker's messages."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from mailroom.orchestrator.campaign.coordinator import LaunchConfig
from mailroom.orchestrator.cluster.evidence_transfer import (
    CHUNK_BYTES,
    DriverEvidence,
    EvidencePathError,
    attempt_chunks,
    checked_name,
)
from mailroom.orchestrator.cluster.messages import (
    EventLines,
    EvidenceChunk,
    WantsWork,
    WorkerReport,
)
from mailroom.orchestrator.cluster.staging import LOCK_NAME, StagingArea, sweep_stale
from mailroom.orchestrator.cluster.worker import (
    ClusterWorker,
    DriverUnreachableError,
    _ForwardingMirror,
)
from mailroom.orchestrator.episode.evidence import EpisodeEvidence
from mailroom.orchestrator.episode.settings import RunSettings
from mailroom.orchestrator.records.run_directory import RunDirectory
from recorded_events import episode_events

ATTEMPT = "libero_10-t000-i00-o0-s20260907-a1"


def _staged_attempt(root: Path) -> Path:
    directory = root / ATTEMPT
    (directory / "videos").mkdir(parents=True)
    (directory / "observations").mkdir()
    (directory / "result.json").write_text('{"outcome": "success"}')
    (directory / "events.jsonl").write_text('{"event": "a"}\n')
    (directory / "videos" / "agentview.mp4").write_bytes(os.urandom(CHUNK_BYTES * 2 + 17))
    (directory / "observations" / "obs-1.json").write_text("{}")
    (directory / "actor-stderr.log").write_bytes(b"")
    (directory / "observations" / ".obs-2.json.ab12.tmp").write_text("half")
    return directory


def test_an_attempt_is_sent_in_bounded_chunks_with_its_result_last(tmp_path: Path) -> None:
    directory = _staged_attempt(tmp_path / "staged")
    chunks = list(attempt_chunks(directory, ATTEMPT))
    assert all(len(c.data) <= CHUNK_BYTES for c in chunks)
    assert chunks[-1].path == "result.json" and chunks[-1].final
    assert [c.path for c in chunks].count("videos/agentview.mp4") == 3
    assert not any(".tmp" in c.path for c in chunks)  # a publish's half-written file

    run = RunDirectory(tmp_path / "run")
    evidence = DriverEvidence(run)
    completed = [evidence.chunk(c) for c in chunks]
    assert completed == [False] * (len(chunks) - 1) + [True]
    written = run.episode_dir(ATTEMPT)
    for name in ("videos/agentview.mp4", "observations/obs-1.json", "actor-stderr.log"):
        assert (written / name).read_bytes() == (directory / name).read_bytes(), name
    assert (written / "result.json").read_bytes() == (directory / "result.json").read_bytes()
    assert oct(written.stat().st_mode & 0o777) == "0o700"
    assert oct((written / "videos").stat().st_mode & 0o777) == "0o700"


def test_a_result_before_the_rest_of_its_files_is_refused(tmp_path: Path) -> None:
    evidence = DriverEvidence(RunDirectory(tmp_path / "run"))
    assert not evidence.chunk(EvidenceChunk(ATTEMPT, "videos/a.mp4", b"x", final=False))
    with pytest.raises(EvidencePathError, match="before its files"):
        evidence.chunk(EvidenceChunk(ATTEMPT, "result.json", b"{}", final=True))
    assert not (tmp_path / "run" / "episodes" / ATTEMPT / "result.json").exists()


@pytest.mark.parametrize(
    ("attempt_id", "path"),
    [
        ("../x-a1", "result.json"),
        ("not-an-attempt", "result.json"),
        (ATTEMPT, "../../manifest.json"),
        (ATTEMPT, "/etc/passwd"),
        (ATTEMPT, ".lock"),
        (ATTEMPT, "a/b/c/d.json"),
        (ATTEMPT, ""),
        (ATTEMPT, "videos/..\\x"),
    ],
)
def test_names_outside_an_attempts_folder_are_refused(attempt_id: str, path: str) -> None:
    with pytest.raises(EvidencePathError):
        checked_name(attempt_id, path)


def test_mirrored_lines_are_appended_to_the_attempts_log(tmp_path: Path) -> None:
    run = RunDirectory(tmp_path / "run")
    evidence = DriverEvidence(run)
    evidence.events(EventLines(ATTEMPT, ('{"event": "a"}\n', '{"event": "b"}\n')))
    evidence.events(EventLines(ATTEMPT, ('{"event": "c"}\n',), token=3))
    assert [e["event"] for e in episode_events(run.root, ATTEMPT)] == ["a", "b", "c"]
    with pytest.raises(EvidencePathError):
        evidence.events(EventLines("../escape-a1", ("x\n",)))


class _Recorder:
    def __init__(self) -> None:
        self.heard: list[tuple[str, list[str], bool]] = []

    def lines(self, attempt_id: str, lines: Sequence[str], *, disclosing: bool) -> None:
        self.heard.append((attempt_id, list(lines), disclosing))


def test_evidence_mirrors_every_line_in_order_and_flags_the_first_disclosure(
    tmp_path: Path,
) -> None:
    mirror = _Recorder()
    evidence = EpisodeEvidence(tmp_path / ATTEMPT, mirror)
    evidence.event("episode_started")
    evidence.defer_event("decision_served", latency_ms=1.0)
    evidence.event("first_observation_publishing", request_id="r1")
    evidence.event("observation_published", request_id="r1")
    evidence.defer_event("late")
    evidence.close()
    written = (tmp_path / ATTEMPT / "events.jsonl").read_text().splitlines(keepends=True)
    assert [line for _, lines, _ in mirror.heard for line in lines] == written
    assert [d for _, _, d in mirror.heard] == [False, True, False, False]
    assert {a for a, _, _ in mirror.heard} == {ATTEMPT}


def _waiting_inside(thread: threading.Thread, function: str, bound_s: float = 30.0) -> bool:
    """Whether `thread` is seen blocked in a `wait` called from `function` (its innermost
    frames), within `bound_s`; False at once if it ends first."""
    deadline = time.monotonic() + bound_s
    while thread.is_alive() and time.monotonic() < deadline:
        frame = sys._current_frames().get(thread.ident or -1)
        names = []
        while frame is not None:
            names.append(frame.f_code.co_name)
            frame = frame.f_back
        if "wait" in names and function in names[names.index("wait") :]:
            return True
        time.sleep(0.01)
    return False


def test_a_disclosure_waits_for_the_drivers_record(monkeypatch: pytest.MonkeyPatch) -> None:
    import queue

    outbox: queue.Queue[object] = queue.Queue()
    mirror = _ForwardingMirror(outbox)  # type: ignore[arg-type]
    done = threading.Event()

    def disclose() -> None:
        mirror.lines(ATTEMPT, ["x\n"], disclosing=True)
        done.set()

    discloser = threading.Thread(target=disclose, daemon=True)
    discloser.start()
    sent = outbox.get(timeout=5)
    assert isinstance(sent, EventLines) and sent.token is not None
    # Held in the wait for the driver's record, seen in the thread's own stack (not
    # guessed from how long it has not gone on).
    assert _waiting_inside(discloser, "lines"), "the disclosure did not wait for the record"
    assert not done.is_set()
    mirror.ack(sent.token)
    assert done.wait(30)

    monkeypatch.setattr("mailroom.orchestrator.cluster.worker.ACK_TIMEOUT_S", 0.2)
    with pytest.raises(DriverUnreachableError, match="not shown"):
        mirror.lines(ATTEMPT, ["y\n"], disclosing=True)


def _hold_lock(folder: Path) -> subprocess.Popen[bytes]:
    """Another process holding a staging folder's lock, as a live worker does."""
    code = (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(folder / LOCK_NAME)!r}, os.O_RDWR)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "time.sleep(60)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
    return holder


def test_staging_folders_of_dead_workers_are_swept_and_live_ones_kept(tmp_path: Path) -> None:
    base = tmp_path / "staging"
    first = StagingArea(base)
    assert oct(base.stat().st_mode & 0o777) == "0o700"
    assert oct(first.root.stat().st_mode & 0o777) == "0o700"
    live, dead = base / "worker-live", base / "worker-dead"
    for folder in (live, dead):
        folder.mkdir()
        (folder / LOCK_NAME).touch()
        (folder / "run").mkdir()
    holder = _hold_lock(live)
    try:
        removed = sweep_stale(base)
        assert removed == [dead]
        assert live.exists() and first.root.exists()  # this process holds its own lock
    finally:
        holder.kill()
        holder.wait()
    assert sweep_stale(base) == [live]
    first.close()
    assert not first.root.exists()
    # A folder without a lock file (a start cut short) goes once it is old.
    young = base / "worker-young"
    young.mkdir()
    assert sweep_stale(base) == []
    os.utime(young, (time.time() - 3600, time.time() - 3600))
    assert sweep_stale(base) == [young]


def test_a_worker_asks_for_work_once_and_ships_a_finished_attempt_before_its_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    config = LaunchConfig(
        run_dir=tmp_path / "driver-run",
        mailbox_root=tmp_path / "mb",
        settings=RunSettings(),
        record="minimal",
        launcher=None,
    )
    umask = os.umask(0o022)
    os.umask(umask)
    worker = ClusterWorker(config, 0)
    # Process-wide settings are the Ray process's own (RayWorkerProcess), never a caller's.
    assert os.umask(umask) == umask
    try:
        assert worker.config.run_dir == worker.staging.run_dir != config.run_dir
        assert worker.staging.root.parent == tmp_path / f"mailroom-staging-{os.getuid()}"
        assert worker._next_work(False) == [] and worker._next_work(False) == []
        assert [type(m) for m in worker.drain(0.1)] == [WantsWork]  # asked once
        worker.offer(["a group"])
        assert worker._next_work(False) == ["a group"]
        staged = _staged_attempt(worker.staging.run_dir / "episodes")
        worker._report(("finished", ATTEMPT.rsplit("-a", 1)[0], 1, "success", 1.0))
        assert not staged.exists()  # sent, then removed from the node
        sent = worker.drain(0.1)
        assert isinstance(sent[-1], WorkerReport) and sent[-1].payload[0] == "finished"
        chunks = [m for m in sent if isinstance(m, EvidenceChunk)]
        assert chunks[-1].path == "result.json" and len(chunks) == len(sent) - 1
    finally:
        worker.staging.close()
