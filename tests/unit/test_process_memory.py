"""A spawned process reports its own peak memory, not the one inherited from its parent."""

from __future__ import annotations

import json
import resource
import subprocess
import sys

REPORT = (
    "import json, resource; from mailroom.measures import peak_rss_mb; "
    "{touch}"
    "print(json.dumps([peak_rss_mb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]))"
)
TOUCH_200_MB = "b = bytearray(200 << 20); b[:: 1 << 12] = b'\\x01' * len(b[:: 1 << 12]); "


def _child(touch: str = "") -> tuple[float, float]:
    code = REPORT.format(touch=touch)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    own, rusage = json.loads(out.stdout)
    return float(own), float(rusage)


def test_the_peak_counts_what_the_process_touched() -> None:
    bare, _ = _child()
    own, _ = _child(TOUCH_200_MB)
    assert bare < 150
    assert own >= bare + 190


def test_a_child_started_from_a_large_parent_reports_its_own_peak() -> None:
    ballast = bytearray(400 << 20)
    ballast[:: 1 << 12] = b"\x01" * len(ballast[:: 1 << 12])
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 > 400
    own, rusage = _child()
    del ballast
    # A bare interpreter peaks far below its parent, while rusage's figure carries the
    # parent's memory at the fork: the reason the worker figure reads /proc.
    assert own < 150
    assert rusage > 400
