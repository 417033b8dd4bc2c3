"""A FAIL verdict exits 1 by default, like pytest or Polygraphy; fail_on=null keeps 0."""

from __future__ import annotations

from helpers import TINY_RUN, read_record

BREAKS_A_RULE = ["model=tiny_flux2_decoder", *TINY_RUN, "dtype=bfloat16", "metric=regression",
                 "baseline.process=in-process",
                 "+metric.thresholds.cosine={min:1.1,source:planted}"]


def test_a_fail_verdict_exits_1_by_default(cli):
    result, job = cli(*BREAKS_A_RULE)
    record = read_record(job)
    assert record["status"] == "ok" and record["verdict"] == "FAIL"
    assert result.returncode == 1, result.stdout + result.stderr


def test_fail_on_null_keeps_exit_0_for_a_fail_verdict(cli):
    result, job = cli(*BREAKS_A_RULE, "fail_on=null")
    assert read_record(job)["verdict"] == "FAIL" and result.returncode == 0
