"""A launch or resume stopped by a person: Ctrl-C (SIGINT) or SIGTERM asks the campaign
to stop, a second signal ends the process at once, and the launch then says what the run
holds and how to continue it."""

from __future__ import annotations

import contextlib
import gc
import os
import shlex
import signal
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import FrameType

from mailroom.orchestrator.campaign.stopping import StopRequest
from mailroom.orchestrator.cli.exits import EXIT_INTERRUPTED, EXIT_TERMINATED
from mailroom.orchestrator.records.result import EpisodeResult
from mailroom.orchestrator.records.run_directory import RunDirectory

EXIT_CODES = {signal.SIGINT: EXIT_INTERRUPTED, signal.SIGTERM: EXIT_TERMINATED}
WORDS = {signal.SIGINT: "Ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM"}


def exit_code(signum: int) -> int:
    return EXIT_CODES[signal.Signals(signum)]


def resume_command(run_dir: Path) -> str:
    return shlex.join(["mailroom", "resume", str(run_dir)])


@contextlib.contextmanager
def stopping_on_signals(stop: StopRequest, run_dir: Path) -> Iterator[None]:
    """While the block runs, SIGINT and SIGTERM request `stop`. A second one ends the
    process at once: its workers die with it (their parent-death signal), their actors
    with them (`actors/lifetime.py`), and every record already written stays whole."""

    def handle(signum: int, frame: FrameType | None) -> None:
        if not stop.requested:
            stop.request(signum)
            return
        said = f"\nstopped at once; to continue: {resume_command(run_dir)}\n"
        os.write(2, said.encode(errors="replace"))
        _release_semaphores()
        os._exit(exit_code(signum))

    previous = {sig: signal.signal(sig, handle) for sig in EXIT_CODES}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _release_semaphores() -> None:
    """Unlink and unregister this process's named multiprocessing semaphores (its queues'
    to the workers), as their finalizers do at a normal exit. Ended at once, the process
    runs no finalizer: its resource tracker would unlink them itself and print a
    "leaked semaphore objects" warning after the launch's last line."""
    import _multiprocessing  # type: ignore[import-not-found]  # no stubs: CPython's own
    from multiprocessing import resource_tracker
    from multiprocessing.synchronize import SemLock

    for held in gc.get_objects():
        if not isinstance(held, SemLock):
            continue
        name = getattr(getattr(held, "_semlock", None), "name", None)
        if not isinstance(name, str):
            continue
        with contextlib.suppress(OSError):
            _multiprocessing.sem_unlink(name)
        with contextlib.suppress(Exception):
            resource_tracker.unregister(name, "semaphore")


def stopping_words(signame: str) -> str:
    """What the launch says as it starts to stop."""
    return (
        f"stopping ({signame}): no new episode starts; the live ones end and are recorded "
        "as interrupted (a second signal stops at once)"
    )


def _interrupted(result: object) -> bool:
    return isinstance(result, EpisodeResult) and any(e.kind == "interrupted" for e in result.errors)


def stopped_words(signum: int, run_dir: Path, case_ids: Iterable[str]) -> list[str]:
    """What a stopped launch says: what the run holds of its plan's cases, and the
    command that continues it (none when the run was never written)."""
    heard = WORDS[signal.Signals(signum)]
    run = RunDirectory(run_dir)
    if not run.exists():
        return [f"stopped by {heard} before the run started: nothing was written"]
    latest = {record.case_id: record for record in run.attempts()}  # in attempt order
    cases = list(case_ids)
    attempts = [latest[c] for c in cases if c in latest]
    interrupted = sum(_interrupted(a.result) for a in attempts)
    finished = sum(a.result is not None for a in attempts) - interrupted
    unseen = len(attempts) - finished - interrupted
    return [
        f"stopped by {heard}: {finished} attempt(s) finished, {interrupted} cut short and "
        f"recorded as interrupted, {unseen} cut short before their actor saw anything, "
        f"{len(cases) - len(attempts)} of the plan's {len(cases)} case(s) not started",
        f"to continue: {resume_command(run_dir)}",
        "(it runs the cases not started and those cut short before their actor saw "
        "anything; an interrupted attempt is kept, never re-run)",
    ]
