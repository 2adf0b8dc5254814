"""Success rates with their Wilson 95% intervals, one row per run and rate, as inline SVG.

Drawn from numbers and the runs' labels only (escaped): no script, no network. Each
drawn interval is a `line.interval` with the run's key and the rate it belongs to
(`data-run`, `data-rate`), so a page and its tests can find one per run and rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Literal

from mailroom.orchestrator.results.proportions import Interval

RateName = Literal["selected", "completed"]

PLOT, RIGHT, TOP, ROW, AXIS = 400, 90, 8, 18, 34
# The row labels' column is as wide as its longest label (at most `MAX_LABEL_CHARS`
# characters, a longer one cut with its whole text as a tooltip), at `CHAR_PX` a
# character: a bound of the chart font's widest, so no label runs off the left edge.
CHAR_PX, MAX_LABEL_CHARS, MIN_LEFT = 7.5, 48, 120
COLOURS: dict[RateName, str] = {"selected": "#1f5fa8", "completed": "#b05a00"}


@dataclass(frozen=True)
class ChartRow:
    """One run's success rate over one denominator."""

    run_key: str
    label: str
    rate_name: RateName
    success: int
    denominator: int
    rate: float | None
    interval: Interval | None


def _label(row: ChartRow) -> str:
    return f"{row.label} / {row.rate_name}"


def _shown(label: str) -> str:
    return label if len(label) <= MAX_LABEL_CHARS else label[: MAX_LABEL_CHARS - 1] + "…"


def wilson_chart(title: str, rows: Sequence[ChartRow]) -> str:
    """One horizontal interval per row on a 0 to 100% axis, the rate as a dot, the
    denominator at the right; a row without cases says n/a instead."""
    longest = max((len(_shown(_label(r))) for r in rows), default=0)
    left = max(MIN_LEFT, round(longest * CHAR_PX) + 16)
    width = left + PLOT + RIGHT

    def _x(value: float) -> float:
        return left + PLOT * max(0.0, min(1.0, value))

    height = TOP + ROW * len(rows) + AXIS
    parts = [
        f'<svg class="wilson" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}"'
        f' width="{width}" height="{height}" role="img"'
        f' aria-label="{escape(title, quote=True)}">'
    ]
    bottom = TOP + ROW * len(rows)
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = _x(tick)
        parts.append(
            f'<line class="grid" x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{bottom}"'
            ' stroke="#ddd"/>'
            f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle">{tick:.0%}</text>'
        )
    for index, row in enumerate(rows):
        y = TOP + ROW * index + ROW / 2
        colour = COLOURS[row.rate_name]
        label = _label(row)
        shown = _shown(label)
        tip = f"<title>{escape(label)}</title>" if shown != label else ""
        parts.append(
            f'<text class="run-label" x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">'
            f"{tip}{escape(shown)}</text>"
        )
        data = (
            f'data-run="{escape(row.run_key, quote=True)}" data-rate="{row.rate_name}"'
            f' data-success="{row.success}" data-denominator="{row.denominator}"'
        )
        if row.rate is None or row.interval is None:
            parts.append(
                f'<text class="no-rate" {data} x="{_x(0.0) + 4:.1f}" y="{y + 4:.1f}">'
                "n/a (no case)</text>"
            )
        else:
            low, high = _x(row.interval.low), _x(row.interval.high)
            parts.append(
                f'<line class="interval" {data} data-low="{row.interval.low!r}"'
                f' data-high="{row.interval.high!r}" x1="{low:.1f}" y1="{y:.1f}"'
                f' x2="{high:.1f}" y2="{y:.1f}" stroke="{colour}" stroke-width="3"/>'
                f'<circle class="rate" {data} cx="{_x(row.rate):.1f}" cy="{y:.1f}" r="4"'
                f' fill="{colour}"/>'
            )
        parts.append(
            f'<text x="{width - RIGHT + 8}" y="{y + 4:.1f}">{row.success}/{row.denominator}</text>'
        )
    parts.append(
        f'<text x="{left + PLOT / 2:.0f}" y="{height - 4}" text-anchor="middle">'
        "success rate: dot, Wilson 95% interval: bar; successes/denominator at the right"
        "</text></svg>"
    )
    return "".join(parts)
