"""What LIBERO's actors act with and see (the LIBERO, LIBERO-PRO, LIBERO-Plus and
LIBERO-Para families all run on the LIBERO adapter with these)."""

from __future__ import annotations

from mailroom.orchestrator.sim.specs import ActionSpec, ObservationSpec

# An OSC_POSE delta (translation, axis-angle rotation) and the gripper, at robosuite's
# 20 Hz control rate.
LIBERO_ACTION = ActionSpec(
    layout=(
        "dx",
        "dy",
        "dz",
        "droll_axis_angle",
        "dpitch_axis_angle",
        "dyaw_axis_angle",
        "gripper",
    ),
    low=-1.0,
    high=1.0,
    controller="OSC_POSE",
    control_hz=20,
)
# Both cameras 256 pixels a side, turned upright (robosuite renders them upside down);
# ten settling controls with the gripper open, as the field's evaluators run them.
LIBERO_OBSERVATION = ObservationSpec(
    cameras=("agentview", "robot0_eye_in_hand"),
    image_size=256,
    settling_controls=10,
    proprio=(("joint_pos", 7), ("gripper_qpos", 2)),
    camera_transform="image[::-1, ::-1]",
)
# What the adapter sends during settling: no motion, gripper open.
SETTLING_ACTION: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0)
