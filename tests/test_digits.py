"""A judged value is printed with the digits its rule needs, never rounded onto the other side of a
bound."""

from __future__ import annotations

import pytest

from ascendbench.digits import figure, honest, judged_rule, judged_value


@pytest.mark.parametrize(("value", "bound"),
                         [(0.99989, 0.9999), (0.0010004, 0.001), (0.0100001, 0.01),
                                              (29.99996, 30.0), (0.949996, 0.95)])
def test_a_value_printed_beside_its_rule_stays_on_its_side_of_the_bound(value, bound):
    shown = float(honest(value, [bound]))
    assert (shown > bound) == (value > bound) and (shown < bound) == (value < bound)
    # four digits alone would have printed the bound
    assert f"{value:.4g}" == f"{bound:.4g}" or shown != bound


def test_the_warn_bound_counts_too_and_far_values_keep_four_digits():
    assert honest(0.99949, [0.99, 0.9995]) == "0.99949"
    assert honest(0.123456, [0.01]) == "0.1235"


def test_mean_relative_error_prints_in_percent_with_its_rule():
    entry = {"value": 0.0100004, "verdict": "FAIL", "threshold": 0.01, "rule": "<= 0.01"}
    assert judged_value("video/mean_rel_err", entry) == "1.00004%"
    assert judged_rule("video/mean_rel_err", entry) == "<= 1%"
    assert judged_value("cosine", {"value": 0.99989, "rule": ">= 0.9999"}) == "0.99989"


def test_a_latency_of_seconds_prints_in_plain_digits():
    """``11250 ms``, never ``1.125e+04 ms``; small values keep their significant digits."""
    assert [figure(11250.3), figure(5356.2), figure(0.00012345), figure(None)] == [
        "11250", "5356", "0.0001234", "n/a"]
