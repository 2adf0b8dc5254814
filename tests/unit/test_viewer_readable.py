"""orchestrator/viewer/readable.py: values as a page writes them, never a Python repr."""

from __future__ import annotations

import enum
import math
import re

import pytest
from mailroom.benchmarks.libero.specs import LIBERO_ACTION, LIBERO_OBSERVATION
from mailroom.orchestrator.viewer.chart import HEIGHT, LABEL_Y, LEGEND_Y, TOP, WIDTH, action_chart
from mailroom.orchestrator.viewer.readable import (
    ABSENT,
    NONE,
    readable_bool,
    readable_confinement,
    readable_duration_ms,
    readable_duration_s,
    readable_limit,
    readable_number,
    readable_percent,
    readable_value,
)
from mailroom.orchestrator.viewer.run_shape import RunShape

LIBERO_SHAPE = RunShape.of(LIBERO_ACTION, LIBERO_OBSERVATION.cameras)


REPR = re.compile(r"\b(?:True|False|None)\b|[{}\[\]']|\.0\b|e[+-]\d")


class Mode(enum.Enum):
    SANDBOX = "sandbox"


def test_booleans_read_yes_or_no_and_nothing_reads_a_dash() -> None:
    assert readable_bool(True) == "yes" and readable_bool(False) == "no"
    assert readable_bool(None) == ABSENT == "—"
    assert readable_bool(False, yes="held", no="not held") == "not held"
    assert readable_value(True) == "yes" and readable_value(False) == "no"
    assert readable_value(None) == ABSENT


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (3, "3"),
        (60.0, "60"),
        (0.1, "0.1"),
        (1 / 3, "0.3333"),
        (-2.5, "-2.5"),
        (0.00001234, "1.2e-05"),
        (math.nan, "not a number"),
        (math.inf, "infinite"),
        (-math.inf, "minus infinite"),
    ],
)
def test_numbers_without_their_repr(value: float, shown: str) -> None:
    assert readable_number(value) == shown
    assert readable_value(value) == shown


def test_collections_read_as_lists_and_pairs() -> None:
    assert readable_value(["agentview", "robot0_eye_in_hand"]) == "agentview, robot0_eye_in_hand"
    assert readable_value(("a", 2.0, None)) == f"a, 2, {ABSENT}"
    assert readable_value({"b", "a"}) == "a, b"
    assert (
        readable_value({"network": None, "confined": True}) == f"network: {ABSENT}, confined: yes"
    )
    assert readable_value([]) == readable_value({}) == NONE == "none"
    assert readable_value(Mode.SANDBOX) == "sandbox"
    assert readable_value("True {'a': 1}") == "True {'a': 1}"  # text is shown as it is


@pytest.mark.parametrize(
    "value",
    [None, True, False, 0, 1.0, 12.5, [], {}, [True, None], {"a": {"b": [1.0, None]}}, (False,)],
)
def test_no_value_reads_as_a_repr(value: object) -> None:
    shown = readable_value(value)
    assert not REPR.search(shown), shown


@pytest.mark.parametrize(
    ("ms", "shown"),
    [
        (None, ABSENT),
        (0.42, "0.4 ms"),
        (12.34, "12.3 ms"),
        (99.96, "100.0 ms"),
        (178.0, "178 ms"),
        (850.4, "850 ms"),
        (1234.0, "1.2 s"),
        (59_940.0, "59.9 s"),
        (59_960.0, "1 min"),
        (178_392.0, "2 min 58 s"),
        (3_599_600.0, "1 h"),
        (3_900_000.0, "1 h 05 min"),
        (7_170_000.0, "2 h"),  # 1 h 59.5 min: a whole hour, not "1 h 60 min"
        (-1500.0, "minus 1.5 s"),
    ],
)
def test_durations_in_the_unit_their_size_asks(ms: float | None, shown: str) -> None:
    assert readable_duration_ms(ms) == shown
    assert readable_duration_s(None if ms is None else ms / 1000.0) == shown


def test_seconds_read_as_the_same_durations() -> None:
    assert readable_duration_s(0.144) == "144 ms"
    assert readable_duration_s(60.0) == "1 min"
    assert readable_duration_s(600.0) == "10 min"
    assert readable_duration_s(math.inf) == "infinite"


def test_limits_and_confinement_in_words() -> None:
    assert readable_limit(None) == "no limit"
    assert readable_limit(200) == "200"
    assert readable_limit(600.0, readable_duration_s) == "10 min"
    assert readable_confinement("sandbox", "none") == "sandbox (no network)"
    assert readable_confinement("sandbox", "gateway") == "sandbox (the provider gateway only)"
    assert readable_confinement("none", "host") == "unconfined (the host's network)"
    assert readable_confinement("external", None) == "external (network unknown)"
    assert readable_confinement(None, "fibre") == f"{ABSENT} (network fibre)"


def test_rates_as_percentages_and_none_without_a_denominator() -> None:
    assert readable_percent(0.125) == "12.5%"
    assert readable_percent(1) == "100.0%"
    assert readable_percent(None) == "n/a"


def _texts(svg: str) -> list[tuple[float, float, str]]:
    """Each text's x, y and what it says."""
    return [
        (float(x), float(y), said)
        for x, y, said in re.findall(r'<text x="([\d.]+)" y="([\d.]+)"[^>]*>([^<]*)</text>', svg)
    ]


@pytest.mark.parametrize("success", [1, 5, 10])
def test_the_charts_success_label_has_a_band_of_its_own(success: int) -> None:
    """The label sits above the plot, the legend below it: apart wherever the line is
    (the browser test measures the drawn boxes)."""
    svg = action_chart([[0.0] * 7] * 10, success, LIBERO_SHAPE)
    label = [t for t in _texts(svg) if t[2].startswith("native success")]
    assert len(label) == 1 and label[0][1] == LABEL_Y < TOP
    assert all(y >= LEGEND_Y for _, y, said in _texts(svg) if said in ("dx", "gripper"))
    anchored_end = 'text-anchor="end" class="success-label"' in svg
    assert anchored_end == (success > 5)  # runs left of its line in the right half
    assert 0 < label[0][0] < WIDTH and LEGEND_Y < HEIGHT
