"""The sandbox itself, without the simulator: real bubblewrap on real endpoints.

What an actor started in it sees and keeps (environment, descriptors, output, /tmp,
declared paths), and what is refused before anything starts (paths of the evaluator,
unreachable folders, a machine where the sandbox cannot start).
"""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO
from mailroom.orchestrator.actors import sandbox_probe
from mailroom.orchestrator.actors.confinement import (
    REDACTED,
    ConfinementDeclaration,
    ConfinementError,
    ConfinementSettings,
    resolve_confinement,
)
from mailroom.orchestrator.actors.hidden_paths import SandboxPathError, evaluator_paths
from mailroom.orchestrator.actors.launcher import process_launcher
from mailroom.orchestrator.actors.limits import ActorLimits
from mailroom.orchestrator.actors.outer_identity import unreachable_part
from mailroom.orchestrator.actors.process import OUTPUT_CAP_BYTES
from mailroom.orchestrator.actors.sandbox_probe import SandboxUnavailableError
from mailroom.orchestrator.cli.main import main
from sandboxed_starts import run_once_in_sandbox, sandbox_launcher


def test_the_actor_sees_its_environment_and_no_value_it_was_passed_is_recorded(
    mailbox_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAILROOM_TEST_PROVIDER_KEY", "sk-secret-value-123")
    monkeypatch.setenv("MAILROOM_TEST_NOT_DECLARED", "never-passed")
    script = (
        "import json, os, sys; "
        "json.dump({'env': dict(os.environ), 'stdin': sys.stdin.read(), 'cwd': os.getcwd(), "
        "'fds': sorted(os.listdir('/proc/self/fd'))}, open('probe.json', 'w'))"
    )
    launcher = sandbox_launcher(
        ["{python}", "-c", script, "{endpoint}"],
        mailbox_root,
        tmp_path,
        pass_env=("MAILROOM_TEST_PROVIDER_KEY",),
    )
    endpoint, described, _, _ = run_once_in_sandbox(launcher, mailbox_root, tmp_path)
    probe = json.loads((endpoint.scratch / "probe.json").read_text())
    assert probe["env"]["MAILROOM_TEST_PROVIDER_KEY"] == "sk-secret-value-123"
    assert "MAILROOM_TEST_NOT_DECLARED" not in probe["env"]
    assert set(probe["env"]) == {"PATH", "LANG", "HOME", "PWD", "MAILROOM_TEST_PROVIDER_KEY"}
    assert probe["stdin"] == "the instructions\n"
    assert probe["cwd"] == probe["env"]["HOME"] == str(endpoint.scratch)
    assert probe["fds"] == ["0", "1", "2", "3"]  # 3: the listing itself
    assert described["env"] == {
        "PATH": probe["env"]["PATH"],
        "LANG": probe["env"]["LANG"],
        "HOME": probe["env"]["HOME"],
        "MAILROOM_TEST_PROVIDER_KEY": REDACTED,
    }
    assert "sk-secret-value-123" not in json.dumps(described)


def test_output_is_kept_to_its_cap_and_the_truncation_is_marked(
    mailbox_root: Path, tmp_path: Path
) -> None:
    script = "import sys; sys.stdout.write('x' * (3 << 19)); sys.stderr.write('a warning\\n')"
    launcher = sandbox_launcher(["{python}", "-c", script], mailbox_root, tmp_path)
    _, _, details, out = run_once_in_sandbox(launcher, mailbox_root, tmp_path)
    output = details["output"]
    assert isinstance(output, dict)
    assert output["stdout"] == {
        "file": "actor-stdout.log",
        "bytes": 3 << 19,
        "kept_bytes": OUTPUT_CAP_BYTES,
        "truncated": True,
    }
    kept = (out / "actor-stdout.log").read_bytes()
    assert kept.startswith(b"x" * OUTPUT_CAP_BYTES) and b"truncated here" in kept
    assert (out / "actor-stderr.log").read_bytes() == b"a warning\n"
    assert (out / "actor-stdout.log").stat().st_mode & 0o777 == 0o600
    assert details["leftover_processes"] == 0


def test_the_actors_tmp_is_its_own_and_bounded(mailbox_root: Path, tmp_path: Path) -> None:
    script = (
        "import os\n"
        "open('/tmp/mine', 'w').write('x')\n"
        "try:\n"
        "    open('/tmp/big', 'wb').write(b'x' * (16 << 20))\n"
        "    big = 'written'\n"
        "except OSError as exc:\n"
        "    big = exc.strerror\n"
        "os.unlink('/tmp/big')  # scratch/ may share its space\n"
        "open('tmp.txt', 'w').write(big + ' ' + ' '.join(sorted(os.listdir('/tmp'))))\n"
    )
    launcher = sandbox_launcher(["{python}", "-c", script], mailbox_root, tmp_path)
    endpoint, _, _, _ = run_once_in_sandbox(launcher, mailbox_root, tmp_path)
    said = (endpoint.scratch / "tmp.txt").read_text()
    assert said.startswith("No space left on device")  # an 8 MiB /tmp, as the quota
    assert "mine" in said and not Path("/tmp/mine").exists()


def test_a_declared_read_only_path_is_visible_and_read_only(
    mailbox_root: Path, tmp_path: Path
) -> None:
    tool = Path("/tmp") / f"mailroom-test-tool-{os.getpid()}"
    (tool / "bin").mkdir(parents=True, exist_ok=True)
    (tool / "bin" / "agent.txt").write_text("an agent's installation")
    os.chmod(tool / "bin" / "agent.txt", 0o666)  # only the read-only mount stops a write
    os.chmod(tool, 0o755)
    script = (
        f"import os; t = '{tool}/bin/agent.txt'; text = open(t).read()\n"
        "try:\n    open(t, 'a').write('x'); w = 'writable'\n"
        "except OSError as exc:\n    w = exc.strerror\n"
        "open('seen.txt', 'w').write(text + '|' + w)\n"
    )
    try:
        launcher = sandbox_launcher(
            ["{python}", "-c", script], mailbox_root, tmp_path, read_only_paths=(str(tool),)
        )
        endpoint, _, _, _ = run_once_in_sandbox(launcher, mailbox_root, tmp_path)
        assert (endpoint.scratch / "seen.txt").read_text() == (
            "an agent's installation|Read-only file system"
        )
    finally:
        for p in sorted(tool.rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
        tool.rmdir()


def test_an_evaluator_path_inside_a_bound_system_folder_is_masked(
    mailbox_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Were the evaluator's packages under /usr, the sandbox would hide them."""
    hidden = Path("/usr/share/doc")
    assert any(hidden.iterdir())
    real = evaluator_paths
    monkeypatch.setattr(
        "mailroom.orchestrator.actors.launcher.evaluator_paths",
        lambda *also: (*real(*also), hidden),
    )
    script = "import os; open('doc.txt', 'w').write(str(len(os.listdir('/usr/share/doc'))))"
    launcher = sandbox_launcher(["{python}", "-c", script], mailbox_root, tmp_path)
    endpoint, _, _, _ = run_once_in_sandbox(launcher, mailbox_root, tmp_path)
    assert (endpoint.scratch / "doc.txt").read_text() == "0"


def test_named_files_of_the_evaluator_are_refused(mailbox_root: Path, tmp_path: Path) -> None:
    private = REPO / "tests" / "support" / "actors" / "probe_actor.py"
    with pytest.raises(SandboxPathError, match="lies inside"):
        sandbox_launcher(["python3", str(private), "{endpoint}"], mailbox_root, tmp_path)
    with pytest.raises(SandboxPathError):
        sandbox_launcher(
            [sys.executable, "-c", "pass"], mailbox_root, tmp_path
        )  # the venv's Python
    run_file = tmp_path / "run" / "notes.txt"
    run_file.parent.mkdir(parents=True)
    run_file.write_text("x")
    with pytest.raises(SandboxPathError, match=r"is|lies inside"):
        sandbox_launcher(["python3", str(run_file)], mailbox_root, tmp_path)


@pytest.mark.parametrize(
    "path", ["/", str(REPO.parent), str(REPO / "orchestrator"), str(Path.home())]
)
def test_declared_paths_that_hold_or_lie_in_the_evaluator_are_refused(
    mailbox_root: Path, tmp_path: Path, path: str
) -> None:
    with pytest.raises(SandboxPathError):
        sandbox_launcher(["python3", "-c", "pass"], mailbox_root, tmp_path, read_only_paths=(path,))


def test_a_command_not_visible_inside_is_refused(mailbox_root: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfinementError, match="not on the sandbox's PATH"):
        sandbox_launcher(["no-such-agent-cli", "{endpoint}"], mailbox_root, tmp_path)
    with pytest.raises(ConfinementError, match="not visible inside the sandbox"):
        sandbox_launcher(["/opt/elsewhere/agent", "{endpoint}"], mailbox_root, tmp_path)


@pytest.mark.skipif(
    os.geteuid() != 0, reason="only a root evaluator runs the sandbox as a fresh user"
)
def test_an_unreachable_mailbox_root_is_refused(tmp_path: Path) -> None:
    # pytest's own folders are owner-only: a fresh unprivileged user cannot enter.
    assert unreachable_part(tmp_path / "mb") is not None
    with pytest.raises(SandboxPathError, match="cannot be reached"):
        process_launcher(["python3", "-c", "pass"], mailbox_root=tmp_path / "mb")


def test_where_the_sandbox_cannot_start_launch_refuses_with_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unavailable() -> None:
        raise SandboxUnavailableError("bubblewrap (bwrap) is not installed: install it")

    monkeypatch.setattr(sandbox_probe, "find_tool", unavailable)
    plan = tmp_path / "plan.json"
    runner = CliRunner()
    umask = os.umask(0o022)  # the CLI sets its own; give the test process its own back
    try:
        made = runner.invoke(main, ["plan", "--kind", "fast", "--out", str(plan)])
        assert made.exit_code == 0, made.output
        refused = runner.invoke(
            main,
            [
                *("launch", str(plan), "--profile", "scripted_diagnostic"),
                *("--run-dir", str(tmp_path / "run"), "--mailbox-root", str(tmp_path / "mb")),
                *("--actor", "python3 a.py {endpoint}"),
            ],
        )
    finally:
        os.umask(umask)
    assert refused.exit_code == 2
    assert "bubblewrap (bwrap) is not installed" in refused.output
    assert not (tmp_path / "run").exists()  # refused before anything was written
    # Explicitly unconfined, the same machine gets a plain launcher.
    plain = process_launcher(
        ["python3", "-c", "pass"], confinement=ConfinementSettings(mode="none")
    )
    assert plain.sandbox is None


def test_confinement_is_resolved_from_the_request_and_the_profile() -> None:
    declared = ConfinementDeclaration(network="host", pass_env=["PROVIDER_KEY"])
    spawned = resolve_confinement(requested=None, spawns_actors=True, declaration=declared)
    assert (spawned.mode, spawned.network, spawned.pass_env) == (
        "sandbox",
        "host",
        ("PROVIDER_KEY",),
    )
    external = resolve_confinement(requested=None, spawns_actors=False, declaration=declared)
    assert external.mode == "external"
    with pytest.raises(ConfinementError):
        resolve_confinement(requested="sandbox", spawns_actors=False, declaration=declared)
    with pytest.raises(ConfinementError):
        resolve_confinement(requested="external", spawns_actors=True, declaration=declared)
    with pytest.raises(ValueError):
        ConfinementDeclaration(pass_env=["HOME"])
    with pytest.raises(ValueError):
        ConfinementDeclaration(pass_env=["NOT A NAME"])
    with pytest.raises(ValueError):
        ConfinementDeclaration(read_only_paths=["relative/path"])


def test_the_evaluator_paths_hold_the_project_the_environment_and_the_packages() -> None:
    paths = evaluator_paths()
    assert REPO.resolve() in paths and Path(sys.prefix).resolve() in paths
    import libero

    libero_dir = Path(next(iter(libero.__path__))).resolve()
    assert any(libero_dir.is_relative_to(p) for p in paths)


KEYCTL = {"x86_64": 250, "aarch64": 219}[platform.machine()]  # the system call's number


def test_the_actor_cannot_trace_reach_keyrings_or_fill_dev(
    mailbox_root: Path, tmp_path: Path
) -> None:
    """The system-call filter and /dev: tracing the sandbox's pid 1 (to outlive the
    episode), the kernel keyrings (shared with the evaluator's session) and writes to
    /dev are refused; /dev/shm is bounded like /tmp; the process cap and the OOM score
    are the actor's own."""
    script = (
        "import ctypes, os, json\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "out = {}\n"
        "out['ptrace'] = (libc.ptrace(16, 1, 0, 0), os.strerror(ctypes.get_errno()))\n"
        f"out['keyctl'] = (libc.syscall({KEYCTL}, 0, -3, 0), os.strerror(ctypes.get_errno()))\n"
        "try:\n    open('/dev/mine', 'w'); out['dev'] = 'written'\n"
        "except OSError as exc:\n    out['dev'] = exc.strerror\n"
        "try:\n    open('/dev/shm/big', 'wb').write(b'x' * (16 << 20)); out['shm'] = 'written'\n"
        "except OSError as exc:\n    out['shm'] = exc.strerror\n"
        "os.unlink('/dev/shm/big')  # scratch/ may share its space\n"
        "out['null'] = open('/dev/null', 'w').write('x')\n"
        "limits = open('/proc/self/limits').read().splitlines()\n"
        "out['nproc'] = [l for l in limits if l.startswith('Max processes')][0].split()[2]\n"
        "out['oom'] = open('/proc/self/oom_score_adj').read().strip()\n"
        "json.dump(out, open('hardening.json', 'w'))\n"
    )
    launcher = sandbox_launcher(["{python}", "-c", script], mailbox_root, tmp_path)
    endpoint, _, _, _ = run_once_in_sandbox(launcher, mailbox_root, tmp_path)
    seen = json.loads((endpoint.scratch / "hardening.json").read_text())
    assert seen["ptrace"] == [-1, "Operation not permitted"]
    assert seen["keyctl"] == [-1, "Operation not permitted"]
    assert seen["dev"] == "Read-only file system"
    assert seen["shm"] == "No space left on device"  # 8 MiB, as the scratch quota
    assert seen["null"] == 1
    if os.geteuid() == 0:  # a user of its own: the cap counts exactly its processes
        assert (seen["nproc"], seen["oom"]) == (str(ActorLimits().processes), "1000")


def test_system_programs_are_not_copied_in(mailbox_root: Path, tmp_path: Path) -> None:
    launcher = sandbox_launcher(["/usr/bin/python3", "-c", "pass"], mailbox_root, tmp_path)
    assert launcher.program.argv == ("/usr/bin/python3", "-c", "pass")
    assert launcher.program.copied_files == ()
