"""The action vector an actor sends: its components, in order, and its dimension.

One home for both. The observation's `action_spec.layout` names these components, the
parser checks a response's actions against the dimension, the simulator executes the
vector as an OSC_POSE delta (translation, axis-angle rotation) and the gripper, and the
viewer, the export and the replay read recorded actions by them. The frozen response
and observation schemas fix the same dimension (7).
"""

from __future__ import annotations

ACTION_LAYOUT: tuple[str, ...] = (
    "dx",
    "dy",
    "dz",
    "droll_axis_angle",
    "dpitch_axis_angle",
    "dyaw_axis_angle",
    "gripper",
)
ACTION_DIMENSION = len(ACTION_LAYOUT)
