"""Draws an episode's action components over its executed controls as inline SVG.

Drawn here from numbers and the family's layout names only: nothing an actor wrote
reaches the markup as text.

The chart's parts never cover one another: the native success's label sits in a band of
its own above the plot (running left of its line when the line is in the right half), and
the legend is a row of its own under the axis title."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from mailroom.orchestrator.viewer.run_shape import RunShape

WIDTH, HEIGHT = 720, 290
# The plot's margins: the top one holds the success label, the bottom one the axis title
# and, below it, the legend.
LEFT, RIGHT, TOP, BOTTOM = 44, 16, 24, 50
LABEL_Y = TOP - 8  # the success label's baseline
AXIS_TITLE_Y = HEIGHT - BOTTOM + 20
LEGEND_Y = HEIGHT - 12  # the legend row's baseline
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#111111")


def _x(control: float, controls: int) -> float:
    span = WIDTH - LEFT - RIGHT
    return LEFT + span * (control - 1) / max(1, controls - 1)


def _labels(shape: RunShape) -> tuple[str, ...]:
    """A short label per component: the layout's names, rotations without their suffix."""
    return tuple(name.removesuffix("_axis_angle") for name in shape.action_layout)


def action_chart(
    actions: Sequence[Sequence[float]], first_success_control: int | None, shape: RunShape
) -> str:
    """One polyline per component over controls 1..N, on the action space's bounds; the
    native success's control, if any, marked by a vertical line."""
    low, high = shape.action_low, shape.action_high

    def _y(value: float) -> float:
        clipped = max(low, min(high, value))  # a value outside shows at its edge
        return TOP + (HEIGHT - TOP - BOTTOM) * (high - clipped) / (high - low)

    labels = _labels(shape)
    controls = len(actions)
    parts = [
        f'<svg class="actions" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}"'
        f' width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="action components">',
    ]
    for value in (low, (low + high) / 2, high):
        y = _y(value)
        parts.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{value:g}</text>'
        )
    if controls == 0:
        parts.append(f'<text x="{LEFT + 10}" y="{HEIGHT / 2:.0f}">no executed control</text>')
    for index, name in enumerate(labels):
        colour = COLOURS[index % len(COLOURS)]
        points = " ".join(
            f"{_x(i + 1, controls):.1f},{_y(a[index]):.1f}"
            for i, a in enumerate(actions)
            if len(a) > index
        )
        if controls == 1 and points:
            cx, cy = points.split(",")
            parts.append(f'<circle cx="{cx}" cy="{cy}" r="3" fill="{colour}"/>')
        elif points:
            parts.append(
                f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1.5"/>'
            )
        lx = LEFT + (WIDTH - LEFT - RIGHT) * index / len(labels)
        parts.append(
            f'<g class="legend"><line x1="{lx:.1f}" y1="{LEGEND_Y - 4}" x2="{lx + 18:.1f}"'
            f' y2="{LEGEND_Y - 4}" stroke="{colour}" stroke-width="2"/>'
            f'<text x="{lx + 24:.1f}" y="{LEGEND_Y}">{escape(name)}</text></g>'
        )
    if first_success_control is not None and 1 <= first_success_control <= max(controls, 1):
        x = _x(first_success_control, controls)
        # Right of its line in the left half, left of it in the right half: always inside.
        right_half = x > (LEFT + WIDTH - RIGHT) / 2
        label_x, anchor = (x - 4, "end") if right_half else (x + 4, "start")
        parts.append(
            f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{HEIGHT - BOTTOM}" class="success"/>'
            f'<text x="{label_x:.1f}" y="{LABEL_Y}" text-anchor="{anchor}"'
            f' class="success-label">native success (control {first_success_control})</text>'
        )
    parts.append(
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2:.0f}" y="{AXIS_TITLE_Y}" text-anchor="middle">'
        f"executed control{f' (1 to {controls})' if controls else ''}</text></svg>"
    )
    return "".join(parts)
