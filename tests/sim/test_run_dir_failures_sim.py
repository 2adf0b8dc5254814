"""A run directory that fails (full, read-only) is a typed infrastructure error.

The filesystems are real: small tmpfs mounts made for the test. Nothing partial is
ever left under a final name: a result document is whole or absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, cli_plan, launch_command
from mailroom.mailbox.schemas import schema_errors

# The profile's own actor: copied into the sandbox, run by the system's Python.
ACTOR = f"{{python}} {REPO / 'agents/scripted_diagnostic/actor.py'} {{endpoint}}"


def _mount(where: Path, size: str) -> None:
    where.mkdir(parents=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        if os.geteuid() != 0:
            pytest.skip("mounting a small tmpfs needs root, which CI here has")
        pytest.fail(f"this test needs to mount a small tmpfs: {done.stderr.strip()}")


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "small"
    _mount(where, "400k")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def _plan(tmp_path: Path) -> Path:
    return cli_plan(tmp_path / "plan.json", "fast")


def _launch(
    plan: Path, run_dir: Path, mailbox: Path, *options: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        launch_command(
            plan,
            run_dir,
            mailbox,
            ACTOR,
            "--max-policy-calls",
            "8",
            *options,
        ),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _no_partial_results(run_dir: Path) -> None:
    for result in run_dir.glob("episodes/*/result.json"):
        assert schema_errors("mailroom.episode_result/v8", json.loads(result.read_text())) == []


def test_evidence_that_cannot_be_written_ends_episodes_as_typed_errors(
    small_fs: Path, tmp_path: Path, mailbox_root: Path
) -> None:
    """Room for the results but not for the evidence: each episode errors, typed."""
    run_dir = small_fs / "run"
    # One episode at a time: what a failed evidence write gives back is then the room of
    # that episode's result, not taken by another live episode's images first.
    done = _launch(_plan(tmp_path), run_dir, mailbox_root / "mb", "--slots", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    _no_partial_results(run_dir)
    results = [json.loads(p.read_text()) for p in run_dir.glob("episodes/*/result.json")]
    assert len(results) == 2
    for doc in results:
        assert doc["outcome"] == "error" and doc["termination"] == "infrastructure_error"
        assert [(e["kind"], e["code"]) for e in doc["errors"]] == [
            ("infrastructure_error", "io_error")
        ]
        assert "No space left" in doc["errors"][0]["message"]


def test_a_run_directory_that_fills_up_is_a_typed_infrastructure_error(
    tmp_path: Path, mailbox_root: Path
) -> None:
    """The run directory fills up completely mid-episode: every episode still records
    how it ended (typed io_error), in the room each kept for its last records; nothing
    is written half."""
    where = tmp_path / "fills"
    _mount(where, "8m")
    try:
        run_dir = where / "run"
        proc = subprocess.Popen(
            launch_command(
                _plan(tmp_path),
                run_dir,
                mailbox_root / "mb",
                ACTOR,
                "--max-policy-calls",
                "8",
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if any(
                b"observation_published" in p.read_bytes()
                for p in run_dir.glob("episodes/*/events.jsonl")
            ):
                break
            time.sleep(0.02)
        with (where / "filler").open("wb") as filler:  # take every byte that is left
            try:
                while True:
                    filler.write(b"\0" * 65536)
                    filler.flush()
            except OSError:
                pass
        _, stderr = proc.communicate(timeout=600)
        # Each episode kept room for its last records as its control loop started: how
        # it ended is recorded, though nothing else fits.
        assert proc.returncode == 0, stderr[-2000:]
        assert "Traceback" not in stderr
        _no_partial_results(run_dir)
        results = [json.loads(p.read_text()) for p in run_dir.glob("episodes/*/result.json")]
        assert len(results) == 2
        for doc in results:  # a response that could not be kept is typed by its claim
            assert doc["outcome"] == "error" and len(doc["errors"]) == 1, doc["errors"]
            assert "No space left" in doc["errors"][0]["message"], doc["errors"]
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_read_only_run_directory_is_refused_cleanly(
    small_fs: Path, tmp_path: Path, mailbox_root: Path
) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    done = _launch(_plan(tmp_path), small_fs / "run", mailbox_root / "mb")
    assert done.returncode == 7, done.stderr[-2000:]
    said = " ".join(done.stderr.split())  # the console wraps long lines
    assert "Read-only file system" in said and "Traceback" not in said
    assert list(small_fs.iterdir()) == []
    assert not (mailbox_root / "mb").exists() or list((mailbox_root / "mb").iterdir()) == []
