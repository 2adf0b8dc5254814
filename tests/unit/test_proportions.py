"""Wilson intervals and the exact McNemar test against published values."""

from __future__ import annotations

from fractions import Fraction
from math import sqrt

import pytest
from mailroom.orchestrator.results.proportions import mcnemar_exact, wilson_interval


@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [
        # Newcombe (1998), "Two-sided confidence intervals for the single proportion:
        # comparison of seven methods", Statistics in Medicine 17:857-872, Table I,
        # method 3 (Wilson score, no continuity correction).
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0000, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_intervals_match_newcombes_table(
    successes: int, n: int, low: float, high: float
) -> None:
    interval = wilson_interval(successes, n)
    assert interval is not None
    assert (round(interval.low, 4), round(interval.high, 4)) == (low, high)
    assert interval.confidence == 0.95 and interval.method == "wilson"


def test_wilson_intervals_at_the_edges() -> None:
    assert wilson_interval(0, 0) is None
    every = wilson_interval(20, 20)
    assert every is not None and every.high == 1.0 and round(every.low, 4) == 0.8389
    none = wilson_interval(0, 20)
    assert none is not None and none.low == 0.0
    for bad in ((-1, 5), (6, 5)):
        with pytest.raises(ValueError):
            wilson_interval(*bad)


def test_the_exact_mcnemar_test_is_the_two_sided_sign_test_of_the_discordant_pairs() -> None:
    # The textbook sign test: 10 of 12 discordant pairs one way, two-sided
    # P = 2 (C(12,0) + C(12,1) + C(12,2)) / 2^12 = 158 / 4096 = 0.0386.
    assert mcnemar_exact(10, 2) == float(Fraction(158, 4096))
    assert mcnemar_exact(2, 10) == mcnemar_exact(10, 2)
    assert round(mcnemar_exact(10, 2), 4) == 0.0386
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 3) == 1.0  # capped: twice a tail above one half
    assert mcnemar_exact(0, 5) == 2 / 32
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_mcnemar_on_agrestis_presidential_approval_pairs() -> None:
    # Agresti, An Introduction to Categorical Data Analysis (2nd ed., 2007), Table 8.1:
    # 1600 people asked twice; 150 approved then disapproved, 86 the reverse. The
    # asymptotic statistic there is z^2 = (86 - 150)^2 / (86 + 150) = 17.36, P < 0.0001.
    # The exact two-sided P is 2 * P(X <= 86), X ~ Binomial(236, 1/2) = 3.72e-5
    # (scipy.stats.binomtest(86, 236).pvalue = 3.7159e-05); the one-sided tail, 1.86e-5,
    # must not pass.
    p = mcnemar_exact(86, 150)
    assert round(p, 7) == 3.72e-5
    assert mcnemar_exact(150, 86) == p


# The 99% Wilson score interval (z = 2.5758, the 0.995 quantile of the standard normal
# in any table), to four places as scipy 1.17's
# `scipy.stats.binomtest(s, n).proportion_ci(confidence_level=0.99, method="wilson")`
# gives it; `_wilson_by_quadratic` below derives the same figures from the score test.
WILSON_99 = [
    (5, 10, 0.1842, 0.8158),
    (81, 263, 0.2401, 0.3853),
    (15, 148, 0.0536, 0.1833),
    (1, 29, 0.0041, 0.2383),
    (0, 20, 0.0000, 0.2491),
    (20, 20, 0.7509, 1.0000),
]


def _wilson_by_quadratic(successes: int, n: int, z: float) -> tuple[float, float]:
    """The Wilson interval as the two proportions pi the score test just accepts:
    (s/n - pi)^2 = z^2 pi (1 - pi) / n, i.e. (n + z^2) pi^2 - (2 s + z^2) pi + s^2 / n = 0."""
    a, b, c = n + z * z, -(2 * successes + z * z), successes * successes / n
    root = sqrt(b * b - 4 * a * c)
    return (-b - root) / (2 * a), (-b + root) / (2 * a)


@pytest.mark.parametrize(("successes", "n", "low", "high"), WILSON_99)
def test_99_percent_wilson_intervals_match_published_values(
    successes: int, n: int, low: float, high: float
) -> None:
    assert tuple(round(x, 4) for x in _wilson_by_quadratic(successes, n, 2.5758)) == (low, high)
    interval = wilson_interval(successes, n, confidence=0.99)
    assert interval is not None and interval.confidence == 0.99
    assert (round(interval.low, 4), round(interval.high, 4)) == (low, high)
