"""Success-rate arithmetic: Wilson intervals and the exact McNemar test.

A few tested lines: neither scipy nor statsmodels is a dependency.

- `wilson_interval`: the Wilson score interval of a binomial proportion (Wilson 1927;
  Newcombe 1998, method 3), which keeps within [0, 1] and stays honest at 0 or n
  successes, where the normal approximation collapses to a point.
- `mcnemar_exact`: the exact (conditional) McNemar test of paired binary outcomes: of
  the discordant pairs, how many favour A, against Binomial(b + c, 1/2), two-sided as
  twice the smaller tail, capped at 1.
"""

from __future__ import annotations

from fractions import Fraction
from math import comb, sqrt
from statistics import NormalDist

from pydantic import BaseModel, ConfigDict, Field

CONFIDENCE = 0.95


class Interval(BaseModel):
    """A two-sided confidence interval of a proportion."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    low: float = Field(ge=0, le=1)
    high: float = Field(ge=0, le=1)
    confidence: float = Field(gt=0, lt=1, default=CONFIDENCE)
    method: str = "wilson"


def wilson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> Interval | None:
    """None when there is nothing to estimate from (n = 0)."""
    if not 0 <= successes <= n:
        raise ValueError(f"successes must lie in 0..n, not {successes} of {n}")
    if n == 0:
        return None
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = successes / n
    centre = p + z * z / (2 * n)
    spread = z * sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    denominator = 1 + z * z / n
    low = 0.0 if successes == 0 else max(0.0, (centre - spread) / denominator)
    high = 1.0 if successes == n else min(1.0, (centre + spread) / denominator)
    return Interval(low=low, high=high, confidence=confidence)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact p-value for `b` pairs where only A succeeded and `c` where only B
    did (1.0 without discordant pairs)."""
    if b < 0 or c < 0:
        raise ValueError("discordant counts are never negative")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(Fraction(comb(n, i), 2**n) for i in range(min(b, c) + 1))
    return float(min(Fraction(1), 2 * tail))
