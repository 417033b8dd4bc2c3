"""The sign test on interleaved block pairs: its examples, and one test shared by the gate and the job's A/B."""

from __future__ import annotations

import doctest

from ascendbench.bench import pairs
from ascendbench.report import paired


def test_docstring_examples_hold():
    assert doctest.testmod(pairs).failed == 0


def test_the_gate_and_the_ab_use_the_same_test():
    assert (paired.paired_shift, paired.sign_p, paired.MIN_PAIRS) == (pairs.paired_shift, pairs.sign_p, pairs.MIN_PAIRS)


def test_a_tie_counts_for_neither_side():
    shift, low, high, p = pairs.paired_shift([1.0] * 6, [1.0, 1.0, 1.1, 1.1, 1.1, 1.1])
    assert p == pairs.sign_p(4, 4) == 1 / 16 and low == 0.0 and high is not None
