"""`mailroom export RUN --format parquet` as a user runs it, and a column of what it wrote."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pyarrow as pa
from conftest import mailroom_exe


def export(*args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """`mailroom export ARGS --format parquet --json`, 200 columns wide: the process and
    its summary (empty when it printed none)."""
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run(
        [mailroom_exe(), "export", *args, "--format", "parquet", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    summary: dict[str, Any] = json.loads(proc.stdout) if proc.stdout else {}
    return proc, summary


def column(table: pa.Table, name: str) -> list[Any]:
    values: list[Any] = table.column(name).to_pylist()
    return values
