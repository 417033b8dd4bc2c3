"""The end-of-job summary prints verdict-bearing values with the digits their rules need."""

from __future__ import annotations

from ascendbench.job.summary import summary_lines


def test_a_cosine_just_under_its_bound_is_not_printed_as_the_bound():
    record = {"job": {"model": "m"}, "verdict": "FAIL", "metrics": {
        "video/cosine": {"value": 0.99989, "verdict": "FAIL", "threshold": 0.9999, "rule": ">= 0.9999"},
        "video/mean_rel_err": {"value": 0.068, "verdict": "FAIL", "threshold": 0.01, "rule": "<= 0.01"}}}
    text = "\n".join(summary_lines(record, "record.json"))
    assert "video/cosine 0.99989 FAIL (>= 0.9999)" in text
    assert "0.9999 FAIL" not in text.replace("0.99989", "")
    assert "video/mean_rel_err 6.8% FAIL (<= 1%)" in text
