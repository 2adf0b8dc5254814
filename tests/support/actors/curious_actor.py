#!/usr/bin/env python3
"""Test actor that looks for what it must never see, then stops (argv: ENDPOINT PORT).

It tries what a curious code agent with a shell would try, records what it found in
scratch/probes.json, answers its first observation with `stop` and waits for the end.
Every probe is read-only or undone at once (a write is a uniquely named file, removed
again; run records are only checked for write access), so running it unconfined harms
nothing. Standard library only: it runs inside the sandbox.

A probe never swallows what stopped it: each refusal is kept in `errors` (probe name ->
the error), and a file walk that ran out of time says `timed_out` (then "nothing found"
means "not reached in time", never "refused").

`curious_actor.py --probe fds` runs the descriptor probe alone and prints its finding
(a test hands it a descriptor, as a positive control the launcher never allows).
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


# Written backwards: the actor's own program text (which its sandbox holds in memory)
# must not itself contain what it looks for.
def _rev(text: str) -> str:
    return text[::-1]


MARKERS = tuple(
    _rev(m).encode()
    for m in ("orebil", "lddb.", "/sedosipe", "nosj.tsefinam", "nosj.tluser", "rid-nur--")
)
BDDL_SUFFIX = _rev("lddb.")
RECORD_NAMES = {
    _rev(n) for n in ("nosj.tluser", "nosj.tsefinam", "nosj.tniopdne", "nosj.nalp", "lnosj.stneve")
}
PACKAGE_NAMES = {_rev(n) for n in ("orebil", "etiusobor", "ocojum", "moorliam")}
WANTED: dict[str, Callable[[str], bool]] = {
    "goal_files": lambda name: name.endswith(BDDL_SUFFIX),
    "run_records": lambda name: name in RECORD_NAMES,
    "evaluator_packages": lambda name: name in PACKAGE_NAMES,
}
WALK_FIRST = ("/tmp", "/work", "/root", "/home", "/opt", "/srv", "/var", "/usr", "/")
SKIP = {"/proc", "/sys", "/dev"}
WALK_BUDGET_S = 30.0
# probe name -> what stopped it (an OSError's errno name and message), for probes.json.
ERRORS: dict[str, str] = {}


def _note(probe: str, exc: OSError) -> None:
    """Keep the first error a probe met (the later ones of a walk are counted)."""
    code = errno.errorcode.get(exc.errno or 0, "no errno")
    ERRORS.setdefault(probe, f"{code}: {exc.strerror or exc}")


def _cmdline(pid: str) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def _status(pid: str) -> dict[str, str]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


def identity() -> dict[str, Any]:
    status = _status("self")
    try:
        os.setuid(0)
        became_root = os.getuid() == 0 and status.get("Uid", "").split()[0] != "0"
    except OSError as exc:
        _note("identity.setuid", exc)
        became_root = False
    return {
        "uid": os.getuid(),
        "cap_eff": status.get("CapEff", "").strip(),
        "no_new_privs": status.get("NoNewPrivs", "").strip(),
        "became_root": became_root,
    }


def processes() -> list[str]:
    return [_cmdline(p) for p in sorted(os.listdir("/proc")) if p.isdigit()][:200]


def parent_pid() -> int:
    """The parent as /proc shows it: in a pid namespace of its own whose parent lies
    outside, getppid() says 0, while a /proc of the host still names the parent."""
    try:
        stat = Path("/proc/self/stat").read_text()
    except OSError as exc:
        _note("parent_pid", exc)
        stat = ""
    fields = stat.rsplit(")", 1)[-1].split()
    ppid = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0
    return ppid or os.getppid()


def ancestors() -> list[dict[str, Any]]:
    found = []
    pid = str(parent_pid())
    while pid not in ("0", ""):
        fds = []
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    fds.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
                except OSError as exc:
                    _note("ancestors.open_files", exc)
        except OSError as exc:
            _note("ancestors.open_files", exc)
        found.append({"pid": pid, "cmdline": _cmdline(pid), "open_files": fds})
        pid = _status(pid).get("PPid", "").strip()
        if len(found) > 20:
            break
    return found


def parent_memory() -> dict[str, Any]:
    """Read the parent's writable memory and look for names of the run or the task."""
    ppid = parent_pid()
    seen: set[str] = set()
    readable = False
    budget = 64 << 20
    try:
        maps = Path(f"/proc/{ppid}/maps").read_text().splitlines()
        with open(f"/proc/{ppid}/mem", "rb", buffering=0) as mem:
            for line in maps:
                span, perms = line.split()[:2]
                if "r" not in perms or "w" not in perms:
                    continue
                start, end = (int(x, 16) for x in span.split("-"))
                size = min(end - start, budget)
                if size <= 0:
                    break
                try:
                    mem.seek(start)
                    chunk = mem.read(size)
                except OSError as exc:
                    _note("parent_memory.region", exc)
                    continue
                readable = True
                budget -= len(chunk)
                seen |= {m.decode() for m in MARKERS if m in chunk}
    except OSError as exc:
        _note("parent_memory", exc)
    return {"readable": readable, "markers": sorted(seen)}


def files() -> dict[str, Any]:
    """Up to five of each wanted kind; `timed_out` when the walk ran out of time (what
    it did not find then was not reached in time), `unreadable` the folders it could
    not list (the first error is in `errors`)."""
    found: dict[str, Any] = {kind: [] for kind in WANTED}
    visited: set[str] = set()
    unreadable = 0

    def refused(exc: OSError) -> None:
        nonlocal unreadable
        unreadable += 1
        _note("files", exc)

    deadline = time.monotonic() + WALK_BUDGET_S
    timed_out = False
    for top in WALK_FIRST:
        for root, dirs, names in os.walk(top, onerror=refused):
            if time.monotonic() > deadline:
                timed_out = True
                dirs[:] = []
                break
            if root in SKIP or root in visited:
                dirs[:] = []
                continue
            visited.add(root)
            for name in [*names, *dirs]:
                for kind, wanted in WANTED.items():
                    if wanted(name) and len(found[kind]) < 5:
                        found[kind].append(os.path.join(root, name))
            if all(len(found[kind]) >= 5 for kind in WANTED):
                return {**found, "timed_out": False, "unreadable": unreadable}
        if timed_out:
            break
    return {**found, "timed_out": timed_out, "unreadable": unreadable}


def _can_create(directory: str, name: str) -> bool:
    probe = os.path.join(directory, f".probe-{secrets.token_hex(4)}")
    try:
        with open(probe, "x") as fh:
            fh.write("x")
    except OSError as exc:
        _note(f"writes.{name}", exc)
        return False
    os.unlink(probe)
    return True


def writes(endpoint: Path, records: list[str]) -> dict[str, bool]:
    return {
        "outbox": _can_create(str(endpoint / "outbox"), "outbox"),
        "endpoint_root": _can_create(str(endpoint), "endpoint_root"),
        "usr": _can_create("/usr", "usr"),
        "etc": _can_create("/etc", "etc"),
        # Only checked (never written): False with no record found to check.
        "run_records": any(os.access(r, os.W_OK) for r in records),
        "inbox": _can_create(str(endpoint / "inbox"), "inbox"),
        "scratch": _can_create(str(endpoint / "scratch"), "scratch"),
    }


def host_tmp_marker(token: str) -> bool:
    """A file in /tmp named for this endpoint: the test looks for it on the host."""
    try:
        Path(f"/tmp/curious-{token}").write_text("left by an actor")
    except OSError as exc:
        _note("host_tmp_marker", exc)
        return False
    return True


def other_endpoints(endpoint: Path) -> list[str] | str:
    try:
        return sorted(n for n in os.listdir(endpoint.parent) if n != endpoint.name)
    except OSError as exc:
        return f"refused: {exc.strerror}"


def network(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(b"curious actor\n")
    except OSError as exc:
        _note("network", exc)
        return False
    return True


def open_fds() -> list[str]:
    listing = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY)
    try:
        out = []
        for fd in sorted(os.listdir("/proc/self/fd"), key=int):
            if int(fd) == listing:
                continue
            try:
                out.append(f"{fd} -> {os.readlink(f'/proc/self/fd/{fd}')}")
            except FileNotFoundError:
                continue  # os.listdir's own descriptor, closed once it had listed
            except OSError as exc:
                _note("fds", exc)
        return out
    finally:
        os.close(listing)


def double_fork(scratch: Path) -> None:
    """A grandchild in its own session that keeps beating for a minute."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            (scratch / "grandchild.pid").write_text(str(os.getpid()))
            for _ in range(600):
                (scratch / "heartbeat").write_text(str(time.time()))
                time.sleep(0.1)
        os._exit(0)
    os.wait()


def main() -> int:
    if sys.argv[1:] == ["--probe", "fds"]:
        print(json.dumps({"fds": open_fds(), "errors": ERRORS}))
        return 0
    endpoint, port = Path(sys.argv[1]), int(sys.argv[2])
    sys.stdin.read()
    report: dict[str, Any] = {"fds": open_fds()}
    double_fork(endpoint / "scratch")
    report["identity"] = identity()
    report["processes"] = processes()
    report["ancestors"] = ancestors()
    report["parent_memory"] = parent_memory()
    report["files"] = files()
    report["writes"] = writes(endpoint, report["files"]["run_records"])
    report["host_tmp_marker"] = host_tmp_marker(endpoint.name)
    report["other_endpoints"] = other_endpoints(endpoint)
    report["network"] = network(port)
    report["home"] = os.path.expanduser("~")
    report["errors"] = ERRORS
    final = endpoint / "scratch" / "probes.json"
    final.with_name(".probes.tmp").write_text(json.dumps(report))
    os.replace(final.with_name(".probes.tmp"), final)
    print(f"probes done: {len(report)} kinds", flush=True)  # kept privately as actor output
    obs = endpoint / "outbox" / "obs-1.json"
    while not obs.exists():
        time.sleep(0.02)
    observation = json.loads(obs.read_text())
    response = {
        "schema": "mailroom.response/v1",
        "request_id": observation["request_id"],
        "decision": "stop",
    }
    target = endpoint / observation["response_file"]
    target.with_name(".resp.tmp").write_text(json.dumps(response))
    os.replace(target.with_name(".resp.tmp"), target)
    while not (endpoint / "outbox" / "closed.json").exists():
        time.sleep(0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
