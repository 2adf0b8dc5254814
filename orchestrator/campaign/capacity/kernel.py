"""Before a launch starts: do its live episodes fit the kernel's limits?

Each live episode holds, in its worker, descriptors, an inotify watch and threads, and,
on the machine, a bubblewrap sandbox (two bubblewrap processes and the actor, each in a
user namespace of its own). The costs below were measured on a worker of 40 and of 300
live episodes (the fake simulator and a sandboxed actor held at its second decision:
`tests/stress/test_live_episodes_at_scale.py`, which checks them again on every run); they
grow exactly linearly. `check` multiplies them by the live episodes a launch can have
and compares each with its limit (`KernelLimits`), taking what is in use already where
a limit is shared; `refusal` words the first that does not fit, with what to change.

What an actor itself starts (an agent CLI's node, its shells and threads) is not known
before it runs; a profile that declares `limits.processes` caps it (the sandbox's own
user may have no more processes and threads), and that cap is what each live actor is
counted as against the machine's pids and threads (`Launch.actor_tasks`). A profile
that declares none is counted as its one process: a launch that fits can then still
meet a limit through its actors. This user's RLIMIT_NPROC is checked only when it is
not root, where a sandbox has no user of its own and its actor's tasks are this user's:
it counts them the same. The check runs for the local executor only (a Ray worker's
node has limits of its own).
"""

from __future__ import annotations

from dataclasses import dataclass

from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.campaign.capacity.kernel_limits import KernelLimits

# Measured with /proc/<worker>/fd at 4, 10, 12, 40 and 300 live episodes (`--record
# minimal`): its 4 held endpoint folders (root, outbox, inbox, scratch), the actor's
# stdout and stderr pipes and the 2 files they are kept in, the events and steps logs,
# the room kept for its last records (`episode/evidence.py`); and, sandboxed as root, the
# root of the actor's own tmpfs (`actors/actor_filesystem.py`).
FDS_PER_EPISODE = 12
# `--record full` adds each camera's open MP4 once frames flow (measured by encoding
# 80 frames of 2 cameras in 5 `EpisodeVideo`s: +2 each, no thread).
VIDEO_FDS_PER_EPISODE = 2
# The worker with no live episode: stdin/stdout/stderr, multiprocessing's pipes and
# queues, the hub's inotify descriptor (measured as the intercept: 414 fds at 40 live),
# and, run as root, the file its sandboxes' uid reservations are held in (one for all
# of them: `actors/uid_reservation.py`).
WORKER_BASE_FDS = 15
# /proc/<worker>/task: one thread per actor output stream (stdout, stderr), for the
# episode's lifetime; no thread per inbox (the worker's one `InboxHub` serves them all).
THREADS_PER_EPISODE = 2
# The main thread, the starter, the hub's inotify reader, multiprocessing's queue feeder
# (84 threads at 40 live). A finisher thread lives a few seconds per ending episode.
WORKER_BASE_THREADS = 4
# One inotify watch per live episode (its inbox), on the worker's one inotify instance
# (/proc/<worker>/fdinfo: `inotify wd:` lines); none with `--watch-mode polling`.
INOTIFY_WATCHES_PER_EPISODE = 1
INOTIFY_INSTANCES_PER_WORKER = 1
# Below the worker, per live episode: bubblewrap outside, bubblewrap as the sandbox's
# pid 1, and the actor (a single-threaded diagnostic actor: one task each).
BWRAP_PROCESSES_PER_EPISODE = 2
ACTOR_PROCESSES_PER_EPISODE = 1
PROCESSES_PER_EPISODE = BWRAP_PROCESSES_PER_EPISODE + ACTOR_PROCESSES_PER_EPISODE
# One new namespace of each kind per sandbox (user, pid, mount, net, ipc, uts, cgroup),
# read from /proc/<pid>/ns of the processes below the worker.
USER_NAMESPACES_PER_EPISODE = 1


def actor_tasks(limits: ActorLimits) -> int:
    """What each live actor is counted as against the machine's pids and threads: the
    processes and threads its profile declares it may have (`limits.processes`), or its
    one process where the profile declares none (the default cap, 1024, is a guard, not
    a figure: counted for every actor it would hold back hundreds of tiny ones)."""
    if "processes" in limits.model_fields_set and limits.processes is not None:
        return limits.processes
    return ACTOR_PROCESSES_PER_EPISODE


@dataclass(frozen=True)
class Demand:
    """One resource: what the launch needs of it against its limit (None: no limit)."""

    resource: str
    limit_name: str
    limit: int | None
    in_use: int
    need: int
    per_episode: int
    # Live episodes per worker that would fit (None: no limit).
    slots_that_fit: int | None
    remedy: str

    @property
    def fits(self) -> bool:
        return self.limit is None or self.in_use + self.need <= self.limit


@dataclass(frozen=True)
class Launch:
    """The live episodes a launch can have: its workers (as many as the plan's cases
    allow) and live episodes per worker (its slots, at most its cases)."""

    workers: int
    slots: int
    cases: int
    record_full: bool = True
    inotify: bool = True
    # The processes and threads each live actor may have (its profile's declared cap).
    actor_tasks: int = ACTOR_PROCESSES_PER_EPISODE

    @property
    def active_workers(self) -> int:
        return max(1, min(self.workers, self.cases))

    @property
    def live_per_worker(self) -> int:
        return max(1, min(self.slots, self.cases))

    @property
    def live(self) -> int:
        return min(self.active_workers * self.live_per_worker, max(1, self.cases))


def _slots_that_fit(room: int, per_worker: int, fixed: int) -> int:
    """Live episodes per worker that fit `room`, when each costs `per_worker` summed
    over the workers and `fixed` is needed whatever the slots."""
    if per_worker <= 0:
        return 1 << 30
    return max(0, (room - fixed) // per_worker)


def check(launch: Launch, limits: KernelLimits) -> list[Demand]:
    """Every resource's demand against its limit, in the order they are worded."""
    workers, per_worker, live = launch.active_workers, launch.live_per_worker, launch.live
    fds = FDS_PER_EPISODE + (VIDEO_FDS_PER_EPISODE if launch.record_full else 0)
    # Threads and processes of one worker and its episodes (its actor's as declared),
    # each a pid of the machine.
    per_episode = THREADS_PER_EPISODE + BWRAP_PROCESSES_PER_EPISODE + launch.actor_tasks
    base_tasks = workers * (1 + WORKER_BASE_THREADS)
    remedy_actor = (
        ", or declare a lower limits.processes for the actor"
        if launch.actor_tasks > ACTOR_PROCESSES_PER_EPISODE
        else ""
    )
    worker_limit = limits.open_files_hard or limits.open_files
    demands = [
        Demand(
            "open descriptors of a worker",
            "RLIMIT_NOFILE (a worker raises its soft limit to the hard one)",
            worker_limit,
            0,
            WORKER_BASE_FDS + per_worker * fds,
            fds,
            None if worker_limit is None else _slots_that_fit(worker_limit, fds, WORKER_BASE_FDS),
            "raise the hard limit (ulimit -Hn as root, LimitNOFILE= for a service, "
            "nofile in /etc/security/limits.conf)",
        ),
    ]
    if launch.inotify:
        demands += [
            Demand(
                "inotify instances of this user",
                "fs.inotify.max_user_instances",
                limits.inotify_instances,
                limits.inotify_instances_used,
                workers * INOTIFY_INSTANCES_PER_WORKER,
                0,
                None,
                "use fewer --workers, or raise it (sysctl fs.inotify.max_user_instances=N)",
            ),
            Demand(
                "inotify watches of this user",
                "fs.inotify.max_user_watches",
                limits.inotify_watches,
                limits.inotify_watches_used,
                live * INOTIFY_WATCHES_PER_EPISODE,
                INOTIFY_WATCHES_PER_EPISODE,
                _room(limits.inotify_watches, limits.inotify_watches_used, workers, 1, 0),
                "raise it (sysctl fs.inotify.max_user_watches=N), or --watch-mode polling",
            ),
        ]
    for name, limit_name, limit, used in (
        ("pids (threads and processes) of the machine", "kernel.pid_max",
         limits.pid_max, limits.machine_threads),
        ("threads of the machine", "kernel.threads-max",
         limits.threads_max, limits.machine_threads),
        ("processes and threads of this user", "RLIMIT_NPROC (ulimit -u)",
         limits.user_processes, limits.user_processes_used),
    ):  # fmt: skip
        remedy = f"raise {limit_name.split(' ')[0]}{remedy_actor}"
        demands.append(
            Demand(
                name,
                limit_name,
                limit,
                used,
                base_tasks + live * per_episode,
                per_episode,
                _room(limit, used, workers, per_episode, base_tasks),
                remedy,
            )
        )
    demands.append(
        Demand(
            "user namespaces (one per sandbox)",
            "user.max_user_namespaces",
            limits.user_namespaces,
            0,
            live * USER_NAMESPACES_PER_EPISODE,
            USER_NAMESPACES_PER_EPISODE,
            _room(limits.user_namespaces, 0, workers, USER_NAMESPACES_PER_EPISODE, 0),
            "raise it (sysctl user.max_user_namespaces=N)",
        )
    )
    return demands


def _room(limit: int | None, used: int, workers: int, per_episode: int, fixed: int) -> int | None:
    if limit is None:
        return None
    return _slots_that_fit(limit - used, workers * per_episode, fixed)


def refusal(launch: Launch, limits: KernelLimits) -> str | None:
    """Why the launch cannot start (the first limit it would exceed), or None."""
    for demand in check(launch, limits):
        if demand.fits:
            continue
        assert demand.limit is not None
        live = (
            f"{launch.live} live episode(s) ({launch.active_workers} worker(s) x "
            f"{launch.live_per_worker} slot(s))"
        )
        used = f" ({demand.in_use:,} in use already)" if demand.in_use else ""
        fewer = None
        if demand.per_episode and demand.slots_that_fit:
            fewer = f"use at most --slots {demand.slots_that_fit} per worker"
        elif demand.per_episode:
            fewer = "use fewer --workers"
        ways = "; ".join(w for w in (fewer, demand.remedy) if w)
        each = f", each live episode holding {demand.per_episode}" if demand.per_episode else ""
        return (
            f"{live} would exceed the limit on {demand.resource}: {demand.limit_name} is "
            f"{demand.limit:,}{used}, and they need {demand.need:,}{each}: {ways}"
        )
    return None


def kernel_slots_that_fit(launch: Launch, limits: KernelLimits) -> int | None:
    """The most live episodes per worker every limit holds for the launch's workers
    (None: no limit applies)."""
    fits = [d.slots_that_fit for d in check(launch, limits) if d.slots_that_fit is not None]
    return min(fits, default=None)
