"""The flood section of the benchmark: does one actor churning its inbox slow the others?

Two launches at once, side by side on this machine (`mailroom launch`, one worker each,
the same plan: `episodes` cases of one LIBERO-10 task parked on its simulator, paced
actors thinking `think_s` a decision, all live at once where the serving thread keeps
up). While they run, the inbox of the first live episode of one launch, the flooded
one, is churned for that whole episode with names like responses that are not
(`.resp-<n>.json` and `resp-<n>.json.part`, created and removed, about 2,000 a second),
as a flooding actor would: the watcher sees the same events whoever writes them, the
inbox being the endpoint's, on the host. The flooder is a process of its own, so it
costs both launches the same CPU; what differs is what their watchers and serving
threads are handed. A second round floods the other launch, so that a difference
between the two workers' places on the machine cancels.

Figures, over the decisions of the other cases (the flooded case is left out of both
launches) served while the flood ran and after both launches' last start (a start holds
the serving thread, in either launch): the queueing delay (from the watcher's sight of a
response to the start of its serving) and the wait from the actor's rename to the
response's claim (the watcher's detection included), p50 and p95, in the flooded launch
and in the quiet one, and how many episodes' watchers fell back to scanning (a kernel
queue overflow). The headline figure is the difference of the p95s (flooded minus
quiet) over both rounds pooled.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import IO, Any

from mailroom.measures import percentile
from mailroom.orchestrator.perf.paced_actor import read_answer_times
from mailroom.orchestrator.records.event_log import read_log
from mailroom.orchestrator.records.layout import AttemptPaths, RunPaths

THINK_S = 20.0
DECISIONS = 10
EPISODES = 24
ROUNDS = 2
BURST = 20  # names created and removed between two 10 ms pauses: about 2,000 a second
FLOOD_FILE = "flood.json"
PROFILE = "scripted_diagnostic"  # its limits and declaration; the actor is the paced one


@dataclass(frozen=True)
class FloodOptions:
    """`episodes` cases a launch, `decisions` each, actors thinking `think_s` a decision,
    `rounds` rounds (each floods one of the two launches, in turn)."""

    think_s: float = THINK_S
    decisions: int = DECISIONS
    episodes: int = EPISODES
    rounds: int = ROUNDS


def _mailroom(*args: str) -> list[str]:
    return [sys.executable, "-c", "from mailroom.orchestrator.cli.main import main; main()", *args]


def _live_endpoints(mailbox: Path) -> Iterator[Path]:
    if not mailbox.is_dir():
        return
    for endpoint in sorted(mailbox.iterdir()):
        if (endpoint / "inbox").is_dir() and not (endpoint / "outbox" / "closed.json").exists():
            yield endpoint


def _churn(inbox: Path, closed: Path, stop: EventType) -> None:
    """Create and remove names like responses in `inbox` until its episode ends."""
    n = 0
    while not stop.is_set() and not closed.exists():
        for _ in range(BURST):
            n += 1
            name = f".resp-{n}.json" if n % 2 else f"resp-{n}.json.part"
            try:
                (inbox / name).write_text("{}")
                (inbox / name).unlink()
            except OSError:
                return  # the endpoint is gone
        time.sleep(0.01)


def flood(mailbox: Path, log: Path, stop: EventType) -> None:
    """The flooder's process: the first live endpoint of `mailbox`, flooded until its
    episode ends; `log` then says which and when (its name, from, to)."""
    while not stop.is_set():
        endpoint = next(_live_endpoints(mailbox), None)
        if endpoint is None:
            time.sleep(0.05)
            continue
        began = time.time()
        _churn(endpoint / "inbox", endpoint / "outbox" / "closed.json", stop)
        record = {"endpoint": endpoint.name, "from": began, "to": time.time()}
        log.write_text(json.dumps(record), encoding="utf-8")
        return


def _plan(workdir: Path, episodes: int) -> Path:
    plan = workdir / "plan.json"
    subprocess.run(
        _mailroom(
            *("plan", "--kind", "task_coverage", "--suite", "libero_10", "--task-ids", "0"),
            *("--init-states", ",".join(str(s) for s in range(episodes))),
            *("--out", str(plan)),
        ),
        check=True,
        capture_output=True,
    )
    return plan


def _launch(
    plan: Path, run_dir: Path, mailbox: Path, options: FloodOptions, k: int, stderr: IO[str]
) -> subprocess.Popen[str]:
    actor = (
        f"{sys.executable} -m mailroom.orchestrator.perf.paced_actor {{endpoint}} {k} "
        f"{options.think_s}"
    )
    return subprocess.Popen(
        _mailroom(
            *("launch", str(plan), "--profile", PROFILE, "--actor", actor),
            *("--confinement", "none"),
            *("--run-dir", str(run_dir), "--mailbox-root", str(mailbox)),
            *("--workers", "1", "--slots", str(options.episodes), "--simulators", "parked"),
            *("--max-policy-calls", str(options.decisions), "--replan-interval", str(k)),
            *("--response-timeout", str(max(120.0, 3 * options.think_s)), "--record", "minimal"),
            "--json",
        ),
        stdout=subprocess.DEVNULL,
        stderr=stderr,  # a file: a pipe left unread would stall the launch waited on second
        text=True,
    )


@dataclass
class _Launch:
    """One launch's decisions (attempt, when served, queueing delay ms, rename-to-claim
    ms), its starts, and how many of its episodes' watchers fell back."""

    decisions: list[tuple[str, float, float, float | None]]
    starts: list[float]
    fell_back: int  # episodes whose watcher fell back to scanning (a queue overflow)


def _read_launch(run_dir: Path) -> tuple[_Launch, dict[str, str]]:
    decisions: list[tuple[str, float, float, float | None]] = []
    starts: list[float] = []
    fell_back = 0
    attempt_of: dict[str, str] = {}  # endpoint name -> attempt
    for folder in sorted(RunPaths(run_dir).episodes.iterdir()):
        kept = folder / "endpoint.json"
        if not kept.exists():
            continue
        endpoint = Path(json.loads(kept.read_text(encoding="utf-8"))["endpoint"])
        attempt_of[endpoint.name] = folder.name
        answered = read_answer_times(endpoint)
        claimed: dict[int, float] = {}
        for event in read_log(AttemptPaths(folder).events).records:
            kind = event.get("event")
            if kind == "episode_started":
                starts.append(float(event["t"]))
            elif kind == "watcher_fell_back":
                fell_back += 1
            elif kind == "response_claimed":
                claimed[int(event["sequence"])] = float(event["t"])
            elif kind == "decision_served":
                sequence = int(event["sequence"])
                wait = None
                if sequence in claimed and sequence in answered:
                    wait = (claimed[sequence] - answered[sequence]) * 1000.0
                decisions.append(
                    (folder.name, float(event["t"]), float(event["queue_delay_ms"]), wait)
                )
    return _Launch(decisions, starts, fell_back), attempt_of


def _figures(values: list[float]) -> dict[str, float | int | None]:
    return {
        "decisions": len(values),
        "p50_ms": round(percentile(values, 0.5), 1) if values else None,
        "p95_ms": round(percentile(values, 0.95), 1) if values else None,
    }


def _added(flooded: list[float], quiet: list[float]) -> float | None:
    if not flooded or not quiet:
        return None
    return round(percentile(flooded, 0.95) - percentile(quiet, 0.95), 1)


@dataclass
class _Waits:
    """The others' waits (ms) in the flooded launch and in the quiet one."""

    queue: list[float]
    quiet_queue: list[float]
    to_claim: list[float]
    quiet_to_claim: list[float]

    def extend(self, more: _Waits) -> None:
        self.queue += more.queue
        self.quiet_queue += more.quiet_queue
        self.to_claim += more.to_claim
        self.quiet_to_claim += more.quiet_to_claim

    def added(self) -> dict[str, float | None]:
        return {
            "added_queue_delay_ms_p95": _added(self.queue, self.quiet_queue),
            "added_rename_to_claim_ms_p95": _added(self.to_claim, self.quiet_to_claim),
        }


def _round(
    workdir: Path, mailbox_root: Path, plan: Path, options: FloodOptions, k: int, flooded: str
) -> tuple[dict[str, Any], _Waits]:
    """Launches `a` and `b` at once, `flooded` one of them: their figures, and the waits
    they were taken from (for the rounds pooled)."""
    names = ("a", "b")
    log = workdir / FLOOD_FILE
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    flooder = context.Process(target=flood, args=(mailbox_root / flooded, log, stop))
    with contextlib.ExitStack() as files:
        stderr = {
            n: files.enter_context((workdir / f"{n}.stderr").open("w", encoding="utf-8"))
            for n in names
        }
        launches = {
            n: _launch(plan, workdir / n, mailbox_root / n, options, k, stderr[n]) for n in names
        }
        flooder.start()
        try:
            for launch in launches.values():
                launch.wait()
        finally:
            stop.set()
            flooder.join(timeout=30)
            for launch in launches.values():
                if launch.poll() is None:
                    launch.kill()
                    launch.wait()
    for name, launch in launches.items():
        if launch.returncode != 0:
            said = (workdir / f"{name}.stderr").read_text(encoding="utf-8", errors="replace")
            raise RuntimeError(
                f"flood bench launch {name} exited {launch.returncode}: {said[-2000:]}"
            )
    if not log.exists():
        raise RuntimeError("the flooder found no live episode to flood")
    flooding = json.loads(log.read_text(encoding="utf-8"))
    read = {name: _read_launch(workdir / name) for name in names}
    # The same case left out of both launches: attempts are named by case.
    kept_out = read[flooded][1][flooding["endpoint"]].rsplit("-a", 1)[0]
    begin = max([flooding["from"]] + [max(r[0].starts) for r in read.values()])
    end = flooding["to"]
    queue: dict[str, list[float]] = {}
    waits: dict[str, list[float]] = {}
    for name, (served, _) in read.items():
        within = [
            d
            for d in served.decisions
            if begin <= d[1] <= end and d[0].rsplit("-a", 1)[0] != kept_out
        ]
        queue[name] = [d[2] for d in within]
        waits[name] = [d[3] for d in within if d[3] is not None]
    quiet = "b" if flooded == "a" else "a"
    waits_of = _Waits(queue[flooded], queue[quiet], waits[flooded], waits[quiet])
    figures = {
        "flooded": flooded,
        "flooded_case": kept_out,
        "measured_s": round(max(0.0, end - begin), 1),
        "queue_delay": {"flooded": _figures(queue[flooded]), "quiet": _figures(queue[quiet])},
        "rename_to_claim": {
            "flooded": _figures(waits[flooded]),
            "quiet": _figures(waits[quiet]),
        },
        "watchers_fell_back": {
            "flooded": read[flooded][0].fell_back,
            "quiet": read[quiet][0].fell_back,
        },
        **waits_of.added(),
    }
    return figures, waits_of


def flood_comparison(
    *, workdir: Path, mailbox_root: Path, k: int, options: FloodOptions
) -> dict[str, Any]:
    """The rounds, one after the other; see the module docstring."""
    plan = _plan(workdir, options.episodes)
    rounds: list[dict[str, Any]] = []
    pooled = _Waits([], [], [], [])
    for number in range(options.rounds):
        flooded = "a" if number % 2 == 0 else "b"
        here = workdir / f"round-{number + 1}"
        mailboxes = mailbox_root / f"round-{number + 1}"
        here.mkdir(parents=True)
        mailboxes.mkdir(parents=True)
        mailboxes.chmod(0o711)
        figures, waits = _round(here, mailboxes, plan, options, k, flooded)
        rounds.append(figures)
        pooled.extend(waits)
    added = pooled.added()
    return {
        "think_s": options.think_s,
        "decisions": options.decisions,
        "episodes": options.episodes,
        "flood_added_queue_delay_ms_p95": added["added_queue_delay_ms_p95"],
        "flood_added_rename_to_claim_ms_p95": added["added_rename_to_claim_ms_p95"],
        "queue_delay": {"flooded": _figures(pooled.queue), "quiet": _figures(pooled.quiet_queue)},
        "rename_to_claim": {
            "flooded": _figures(pooled.to_claim),
            "quiet": _figures(pooled.quiet_to_claim),
        },
        "rounds": rounds,
    }
