"""The project never shadows the standard library's `mailbox`, from any working directory."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

from conftest import REPO, mailroom_exe


def _run(code: str, cwd: Path) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_import_mailbox_is_the_standard_library_from_the_repository_root() -> None:
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    printed = Path(_run("import mailbox; print(mailbox.__file__)", cwd=REPO)).resolve()
    assert printed.parent == stdlib
    assert hasattr(__import__("mailbox"), "Maildir")


def test_transport_imports_under_the_project_namespace(tmp_path: Path) -> None:
    for cwd in (REPO, tmp_path):
        printed = _run("import mailroom.mailbox.parser as p; print(p.__file__)", cwd=cwd)
        assert Path(printed).resolve() == (REPO / "mailbox" / "parser.py").resolve()


def test_cli_entry_point_runs() -> None:
    out = subprocess.run([mailroom_exe(), "--help"], check=True, capture_output=True, text=True)
    for command in ("demo", "check-response"):
        assert command in out.stdout
