"""Response detection latency of the mailbox, inotify against polling.

Prints p50/p99 for each watch mode; the measurement itself is
`perf.detection.measure_detection`, which `mailroom bench` calls too.

    .venv/bin/python -m mailroom.orchestrator.perf.detection_latency [--n 200] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys

from mailroom.mailbox.watcher import WatchMode
from mailroom.orchestrator.perf.detection import measure_detection

__all__ = ["main", "measure_detection"]
MODES: tuple[WatchMode, ...] = ("inotify", "polling")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Response detection latency, per watch mode.")
    parser.add_argument("--n", type=int, default=200, help="responses per mode")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    results = [measure_detection(mode, args.n) for mode in MODES]
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"response detection latency, {args.n} atomic writes per mode")
    print(
        f"{'mode':<8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} "
        f"{'judged p50':>11} {'judged p99':>11} {'fell back':>10}"
    )
    for r in results:
        print(
            f"{r['mode']!s:<8} {r['p50_ms']!s:>8} {r['p99_ms']!s:>8} {r['max_ms']!s:>8} "
            f"{r['judged_p50_ms']!s:>11} {r['judged_p99_ms']!s:>11} {r['fell_back']!s:>10}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
