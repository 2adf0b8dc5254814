"""Reference horizons per suite, with the source of each number."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReferenceHorizon:
    controls: int
    source: str


REFERENCE_HORIZONS: dict[str, ReferenceHorizon] = {
    "libero_spatial": ReferenceHorizon(220, "longest training demonstration (lower bound)"),
    "libero_object": ReferenceHorizon(280, "longest training demonstration (lower bound)"),
    "libero_goal": ReferenceHorizon(300, "longest training demonstration (lower bound)"),
    "libero_10": ReferenceHorizon(520, "StarVLA evaluator"),
    "libero_90": ReferenceHorizon(400, "OpenVLA evaluator"),
}
NATIVE_LIFELONG_HORIZON = 600


def reference_horizon(suite: str) -> ReferenceHorizon:
    """PRO variants inherit their base suite's horizon."""
    for base, horizon in REFERENCE_HORIZONS.items():
        if suite == base or suite.startswith(base + "_"):
            return horizon
    raise KeyError(f"no reference horizon for suite {suite!r}")
