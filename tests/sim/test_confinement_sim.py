"""Confinement on the real sandbox, through `mailroom launch` on the real simulator.

A curious actor (tests/support/actors/curious_actor.py) tries what a code agent with a shell
would: the task, the seed and the outcome in its ancestors' command lines, open files
and memory; the run records and the BDDL files on disk; other endpoints; writes outside
inbox/ and scratch/; a loopback listener the test opened; privilege; a double-forked
child. With default settings every probe fails; under `--confinement none` the same
actor shows the difference (`docs/confinement.md` tabulates it): every probe reaches its
target there (its positive control), or is named below as unable to, with the reason. A
file walk that ran out of time fails the test: its "nothing found" is no refusal. A profile that
declares the host network reaches the listener and is reported so; a shell and a
Node.js actor still work inside the sandbox.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    actor_started_events,
    copied_actor,
    launch_command,
    mailroom_exe,
    sandbox_processes_left,
)
from mailroom.mailbox.schemas import schema_errors
from recorded_events import attempt_events


class Listener:
    """A loopback TCP listener that counts who reached it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.reached = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.reached += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


@pytest.fixture(scope="module")
def listener() -> Iterator[Listener]:
    served = Listener()
    yield served
    served.close()


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("confinement")
    plan = base / "plan.json"
    subprocess.run(
        [
            *(mailroom_exe(), "plan", "--kind", "task_coverage", "--suite", "libero_10"),
            *("--task-ids", "0", "--out", str(plan)),
        ],
        check=True,
        capture_output=True,
    )
    for name in ("curious_actor.py", "shell_actor.sh", "node_actor.js"):
        copied_actor(base / "actors", name)
    return base


def _launched(
    work: Path, run_dir: Path, mailbox: Path, actor: str, *options: str, profile: str = ""
) -> subprocess.CompletedProcess[str]:
    """`mailroom launch` of the one-case plan; it must succeed."""
    command = launch_command(work / "plan.json", run_dir, mailbox, actor, *options)
    if profile:
        command[command.index("scripted_diagnostic")] = profile
    done = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _launch(
    work: Path, mailbox_root: Path, label: str, actor: str, *options: str
) -> dict[str, Any]:
    run_dir = work / f"private-{label}"
    mailbox = mailbox_root / label
    # A decoy endpoint beside the actor's own, holding a secret.
    decoy = mailbox / "f00dfeedf00dfeedf00dfeedf00dfeed" / "scratch"
    decoy.mkdir(parents=True)
    (decoy / "secret.txt").write_text("another actor's notes")
    done = _launched(work, run_dir, mailbox, actor, *options, "--max-policy-calls", "4")
    [endpoint] = [p for p in mailbox.iterdir() if not p.name.startswith("f00d")]
    return {
        "run_dir": run_dir,
        "endpoint": endpoint,
        "report": json.loads(done.stdout),
        "result": json.loads(next(run_dir.glob("episodes/*/result.json")).read_text()),
    }


def _probes(run: dict[str, Any]) -> dict[str, Any]:
    probes: dict[str, Any] = json.loads((run["endpoint"] / "scratch" / "probes.json").read_text())
    # What the walk did not reach in time it cannot call refused.
    assert probes["files"]["timed_out"] is False, "the file walk timed out: not a refusal"
    return probes


FDS_PROBE = "an inherited file descriptor beyond 0-2"


def unable_unconfined() -> dict[str, str]:
    """Probes that cannot reach their target even under `--confinement none`, here, and
    why (every other probe must reach it there)."""
    unable = {
        FDS_PROBE: "the launcher passes 0-2 only, in both modes; the probe sees a descriptor "
        "it is handed (test_the_descriptor_probe_sees_an_inherited_descriptor)"
    }
    uid = os.geteuid()
    if uid == 0:
        unable["a double-forked child outlives the episode"] = (
            "as root, a worker holds its actors in a pid namespace of its own in both modes "
            "(orchestrator/actors/lifetime.py): the grandchild outlives its episode but dies "
            "with its worker, before this check (test_worker_lifetime.py)"
        )
    if uid != 0:
        unable["write into /usr or /etc"] = f"needs root; the evaluator runs as uid {uid}"
        unable["root or any capability"] = f"the actor runs as the evaluator's uid {uid}"
        yama = Path("/proc/sys/kernel/yama/ptrace_scope")
        if yama.exists() and yama.read_text().strip() != "0":
            unable["the parent's memory names the run or the task"] = (
                "Yama's ptrace_scope lets only root read a parent's memory"
            )
    return unable


@pytest.fixture(scope="module")
def confined(work: Path, module_mailbox_root: Path, listener: Listener) -> dict[str, Any]:
    actor = f"python3 {work / 'actors' / 'curious_actor.py'} {{endpoint}} {listener.port}"
    before = listener.reached
    run = _launch(work, module_mailbox_root, "sandbox", actor)
    run["listener_reached"] = listener.reached - before
    return run


@pytest.fixture(scope="module")
def unconfined(
    work: Path, module_mailbox_root: Path, listener: Listener
) -> Iterator[dict[str, Any]]:
    actor = f"python3 {work / 'actors' / 'curious_actor.py'} {{endpoint}} {listener.port}"
    before = listener.reached
    run = _launch(work, module_mailbox_root, "none", actor, "--confinement", "none")
    run["listener_reached"] = listener.reached - before
    yield run
    # Unconfined, the double-forked child outlives its episode: end it here.
    pid_file = run["endpoint"] / "scratch" / "grandchild.pid"
    if pid_file.exists():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
    Path(f"/tmp/curious-{run['endpoint'].name}").unlink(missing_ok=True)


PRIVATE_WORDS = (
    "libero",
    "--run-dir",
    "private-",
    "spawn_main",
    "site-packages",
    ".bddl",
    "episodes/",
)


def _mentions_private(texts: list[str]) -> list[str]:
    return [t for t in texts if any(word in t for word in PRIVATE_WORDS)]


def judge(probes: dict[str, Any], run: dict[str, Any]) -> dict[str, bool]:
    """Each probe: True when the actor got at what it must not."""
    ancestors = probes["ancestors"]
    seen = [a["cmdline"] for a in ancestors] + [f for a in ancestors for f in a["open_files"]]
    ident = probes["identity"]
    heartbeat = run["endpoint"] / "scratch" / "heartbeat"
    beat = heartbeat.stat().st_mtime if heartbeat.exists() else 0.0
    time.sleep(0.5)
    still_beating = heartbeat.exists() and heartbeat.stat().st_mtime > beat
    return {
        "the run and task in its ancestors' command lines and open files": bool(
            _mentions_private(seen)
        ),
        "the evaluator's processes and their command lines": bool(
            _mentions_private(probes["processes"])
        ),
        "the parent's memory names the run or the task": bool(probes["parent_memory"]["markers"]),
        "the BDDL files (the success condition)": bool(probes["files"]["goal_files"]),
        "run records (plan, manifest, endpoint map, events, results)": bool(
            probes["files"]["run_records"]
        ),
        "the simulator and project packages": bool(probes["files"]["evaluator_packages"]),
        "another endpoint under the mailbox root": isinstance(probes["other_endpoints"], list)
        and bool(probes["other_endpoints"]),
        "write into outbox/": probes["writes"]["outbox"],
        "write beside inbox/ in the endpoint": probes["writes"]["endpoint_root"],
        "write into /usr or /etc": probes["writes"]["usr"] or probes["writes"]["etc"],
        "write access to run records": probes["writes"]["run_records"],
        "a file in the host's /tmp": Path(f"/tmp/curious-{run['endpoint'].name}").exists(),
        "the loopback listener": run["listener_reached"] > 0 or probes["network"],
        "root or any capability": ident["uid"] == 0
        or ident["became_root"]
        or ident["cap_eff"].strip("0") != "",
        "a double-forked child outlives the episode": still_beating,
        "an inherited file descriptor beyond 0-2": len(probes["fds"]) > 3,
    }


def test_every_probe_fails_in_the_default_sandbox(confined: dict[str, Any]) -> None:
    probes = _probes(confined)
    verdicts = judge(probes, confined)
    assert [name for name, got in verdicts.items() if got] == []
    # What it could do, it could: its own inbox and scratch, and nothing more.
    assert probes["writes"]["inbox"] and probes["writes"]["scratch"]
    # Each refused write says what refused it.
    for target in ("outbox", "endpoint_root", "usr", "etc"):
        assert probes["errors"][f"writes.{target}"].startswith(("EROFS", "EACCES", "EPERM"))
    ident = probes["identity"]
    assert (ident["uid"], ident["no_new_privs"]) == (1000, "1")
    assert [fd.split(" ")[0] for fd in probes["fds"]] == ["0", "1", "2"]
    assert probes["other_endpoints"] == []  # its own endpoint is all it sees
    assert sandbox_processes_left(confined["run_dir"]) == []
    assert probes["home"] == str(confined["endpoint"] / "scratch")


def test_the_same_actor_unconfined_shows_the_difference(
    confined: dict[str, Any], unconfined: dict[str, Any]
) -> None:
    inside = judge(_probes(confined), confined)
    outside_probes = _probes(unconfined)
    outside = judge(outside_probes, unconfined)
    unable = unable_unconfined()
    table = [
        "| probe | `--confinement none` (positive control) | sandbox (default) |",
        "| --- | --- | --- |",
    ]
    for name in inside:
        plain = "reached" if outside[name] else "refused"
        table.append(
            f"| {name} | {plain + (f' ({unable[name]})' if name in unable else '')} | "
            f"{'reached' if inside[name] else 'refused'} |"
        )
    print("\n" + "\n".join(table))
    assert not any(inside.values())
    # The positive control: beside the evaluator, every probe reaches its target, or is
    # named as unable to, and then indeed does not.
    for name, got in outside.items():
        if name in unable:
            assert not got, f"{name} reached, though said unable: {unable[name]}"
        else:
            assert got, f"{name} not reached unconfined: {outside_probes['errors']}"


def test_the_descriptor_probe_sees_an_inherited_descriptor(work: Path) -> None:
    """The positive control the launcher never gives it (it passes 0-2 only)."""
    read_end, write_end = os.pipe()
    try:
        seen = subprocess.run(
            ["python3", str(work / "actors" / "curious_actor.py"), "--probe", "fds"],
            pass_fds=(write_end,),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    finally:
        os.close(read_end)
        os.close(write_end)
    fds = [fd.split(" ")[0] for fd in json.loads(seen.stdout)["fds"]]
    assert str(write_end) in fds and len(fds) > 3


def test_results_report_and_audit_say_how_each_attempt_was_confined(
    confined: dict[str, Any], unconfined: dict[str, Any]
) -> None:
    for run, mode, network in ((confined, "sandbox", "none"), (unconfined, "none", "host")):
        result = run["result"]
        assert schema_errors("mailroom.episode_result/v8", result) == []
        assert result["confinement"] == {"mode": mode, "network": network}
        manifest = json.loads((run["run_dir"] / "manifest.json").read_text())
        assert schema_errors("mailroom.run_manifest/v8", manifest) == []
        assert manifest["confinement"]["mode"] == mode
    assert confined["report"]["overall"]["not_confined"] == 0
    assert unconfined["report"]["overall"]["not_confined"] == 1
    words = subprocess.run(
        [mailroom_exe(), "report", str(unconfined["run_dir"])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = " ".join(words.stderr.split())
    assert "1 attempts were NOT confined" in said and "were not confined" in said
    audit = subprocess.run(
        [mailroom_exe(), "audit", str(confined["run_dir"]), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert audit.returncode == 0 and json.loads(audit.stdout)["clean"] is True


def test_the_actors_output_is_kept_privately(confined: dict[str, Any]) -> None:
    attempt = next(confined["run_dir"].glob("episodes/*"))
    assert (attempt / "actor-stdout.log").read_text() == "probes done: 12 kinds\n"
    stopped = attempt_events(attempt, "actor_stopped")[0]
    assert stopped["output"]["stdout"] == {
        "bytes": 22,
        "file": "actor-stdout.log",
        "kept_bytes": 22,
        "truncated": False,
    }
    assert stopped["leftover_processes"] == 0
    assert not list(confined["endpoint"].rglob("actor-std*"))  # never in the endpoint


def test_a_profile_that_declares_the_host_network_reaches_it_and_says_so(
    work: Path, mailbox_root: Path, listener: Listener
) -> None:
    actor = f"python3 {work / 'actors' / 'curious_actor.py'} {{endpoint}} {listener.port}"
    before = listener.reached
    done = _launched(
        work, work / "private-networked", mailbox_root / "mb", actor, profile="networked_code_agent"
    )
    assert listener.reached > before
    report = json.loads(done.stdout)
    assert report["confinement_modes"] == {"sandbox (host network)": 1}
    manifest = json.loads((work / "private-networked" / "manifest.json").read_text())
    assert (manifest["confinement"]["mode"], manifest["confinement"]["network"]) == (
        "sandbox",
        "host",
    )
    [started] = actor_started_events(work / "private-networked")
    assert started["confinement"]["network"] == "host"
    endpoint = next((mailbox_root / "mb").iterdir())
    probes = json.loads((endpoint / "scratch" / "probes.json").read_text())
    assert probes["network"] is True and probes["files"]["goal_files"] == []  # still confined


@pytest.mark.parametrize(
    ("interpreter", "script"), [("sh", "shell_actor.sh"), ("node", "node_actor.js")]
)
def test_a_shell_and_a_node_actor_work_inside_the_sandbox(
    work: Path, mailbox_root: Path, interpreter: str, script: str
) -> None:
    # make installs Debian's nodejs (the agent CLIs need it too): missing is a failure.
    assert shutil.which(interpreter, path="/usr/bin:/bin") is not None, (
        f"{interpreter} is not installed under /usr: `make system-deps` installs it"
    )
    run_dir = work / f"private-{interpreter}"
    actor = f"{interpreter} {work / 'actors' / script} {{endpoint}}"
    _launched(work, run_dir, mailbox_root / "mb", actor)
    result = json.loads(next(run_dir.glob("episodes/*/result.json")).read_text())
    c = result["counters"]
    assert (c["action_decisions"], c["stop_responses"], c["rejected_responses"]) == (2, 1, 0)
    assert result["termination"] == "actor_stop" and result["confinement"]["mode"] == "sandbox"
    stdout = next(run_dir.glob("episodes/*/actor-stdout.log")).read_text()
    assert stdout.splitlines() == ["answered 1", "answered 2", "answered 3"]


def test_the_audit_finds_a_case_name_the_coordinator_put_in_a_real_actors_argv(
    work: Path, mailbox_root: Path
) -> None:
    """A structured argv recorded by a real launch, not a hand-built event."""
    run_dir = work / "private-argv"
    actor = f"sh {work / 'actors' / 'shell_actor.sh'} {{endpoint}} libero_10-hint"
    _launched(work, run_dir, mailbox_root / "mb", actor)
    [started] = actor_started_events(run_dir)
    assert started["argv"][-1] == "libero_10-hint"
    audit = subprocess.run(
        [mailroom_exe(), "audit", str(run_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert audit.returncode == 6
    leaks = json.loads(audit.stdout)["leaks"]
    assert {leak["where"] for leak in leaks} == {"argv"}
