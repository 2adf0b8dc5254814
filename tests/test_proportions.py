"""Wilson intervals and the exact McNemar test against published values."""

from __future__ import annotations

from fractions import Fraction

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
    wider = wilson_interval(5, 10, confidence=0.99)
    narrower = wilson_interval(5, 10)
    assert wider is not None and narrower is not None
    assert wider.low < narrower.low and wider.high > narrower.high
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
    # asymptotic statistic there is z^2 = (86 - 150)^2 / (86 + 150) = 17.36, P < 0.0001;
    # the exact test agrees in order of magnitude.
    assert round((86 - 150) ** 2 / (86 + 150), 2) == 17.36
    p = mcnemar_exact(86, 150)
    assert 1e-5 < p < 1e-4
