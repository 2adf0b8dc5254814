"""Kernel limits the tests reason about: made-up ones with room for any launch (`ROOMY`,
to be lowered one at a time), and this machine's own inotify event queue length."""

from __future__ import annotations

from pathlib import Path

from mailroom.orchestrator.campaign.capacity.kernel_limits import KernelLimits

ROOMY = KernelLimits(
    open_files=1024,
    open_files_hard=1 << 20,
    inotify_instances=128,
    inotify_instances_used=0,
    inotify_watches=100_000,
    inotify_watches_used=0,
    user_processes=None,
    user_processes_used=0,
    pid_max=4_194_304,
    threads_max=1_000_000,
    machine_processes=100,
    machine_threads=200,
    user_namespaces=100_000,
)


def max_queued_events() -> int:
    """This machine's inotify event queue length (`fs.inotify.max_queued_events`)."""
    return int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
