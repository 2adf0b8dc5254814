"""Draws an episode's seven action components over its executed controls as inline SVG.

Drawn here from numbers only: nothing an actor wrote reaches the markup as text."""

from __future__ import annotations

from collections.abc import Sequence

from mailroom.mailbox.action_layout import ACTION_LAYOUT

WIDTH, HEIGHT = 720, 260
LEFT, RIGHT, TOP, BOTTOM = 44, 110, 14, 30
# A short label per component: the layout's names, rotations without their suffix.
LABELS = tuple(name.removesuffix("_axis_angle") for name in ACTION_LAYOUT)
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#111111")


def _x(control: float, controls: int) -> float:
    span = WIDTH - LEFT - RIGHT
    return LEFT + span * (control - 1) / max(1, controls - 1)


def _y(value: float) -> float:
    clipped = max(-1.0, min(1.0, value))  # the action space; a value outside shows at its edge
    return TOP + (HEIGHT - TOP - BOTTOM) * (1.0 - clipped) / 2.0


def action_chart(actions: Sequence[Sequence[float]], first_success_control: int | None) -> str:
    """One polyline per component over controls 1..N; the native success's control, if
    any, marked by a vertical line."""
    controls = len(actions)
    parts = [
        f'<svg class="actions" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}"'
        f' width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="action components">',
    ]
    for value in (-1.0, 0.0, 1.0):
        y = _y(value)
        parts.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{value:g}</text>'
        )
    if controls == 0:
        parts.append(f'<text x="{LEFT + 10}" y="{HEIGHT / 2:.0f}">no executed control</text>')
    for index, name in enumerate(LABELS):
        points = " ".join(
            f"{_x(i + 1, controls):.1f},{_y(a[index]):.1f}"
            for i, a in enumerate(actions)
            if len(a) > index
        )
        if controls == 1 and points:
            cx, cy = points.split(",")
            parts.append(f'<circle cx="{cx}" cy="{cy}" r="3" fill="{COLOURS[index]}"/>')
        elif points:
            parts.append(
                f'<polyline points="{points}" fill="none" stroke="{COLOURS[index]}"'
                ' stroke-width="1.5"/>'
            )
        ly = TOP + 16 * index + 8
        parts.append(
            f'<line x1="{WIDTH - RIGHT + 12}" y1="{ly}" x2="{WIDTH - RIGHT + 30}" y2="{ly}"'
            f' stroke="{COLOURS[index]}" stroke-width="2"/>'
            f'<text x="{WIDTH - RIGHT + 36}" y="{ly + 4}">{name}</text>'
        )
    if first_success_control is not None and 1 <= first_success_control <= max(controls, 1):
        x = _x(first_success_control, controls)
        parts.append(
            f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{HEIGHT - BOTTOM}" class="success"/>'
            f'<text x="{x + 4:.1f}" y="{TOP + 10}" class="success-label">native success'
            f" (control {first_success_control})</text>"
        )
    parts.append(
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2:.0f}" y="{HEIGHT - 8}" text-anchor="middle">'
        f"executed control (1 to {controls})</text></svg>"
    )
    return "".join(parts)
