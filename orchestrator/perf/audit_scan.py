"""How fast the blinding audit reads a run: files and bytes per second (no assertion).

    .venv/bin/python -m mailroom.orchestrator.perf.audit_scan RUN_DIR [--repeat 3]

The audit reads everything an actor could read (each endpoint's files) and what it was
given; point this at any run directory, e.g. the demo's or a development-plan run.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from mailroom.orchestrator.audit.scan import scan_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    times: list[float] = []
    files = 0
    for _ in range(args.repeat):
        started = time.perf_counter()
        verdict = scan_run(args.run_dir)
        times.append(time.perf_counter() - started)
        files = verdict.files_scanned
    median = statistics.median(times)
    print(f"attempts {verdict.attempts_scanned}, endpoint files {files}")
    print(f"scan median {median:.3f} s over {args.repeat}: {files / median:,.0f} files/s")


if __name__ == "__main__":
    main()
