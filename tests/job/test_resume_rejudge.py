"""Resume judges an old record again from its values and rules (the job's own ``judge``), never
from its verdict fields: edited verdicts, NaN values, dry runs and other schemas run again."""

from __future__ import annotations

import logging

import pytest
from omegaconf import OmegaConf

from ascendbench.job.record import RecordWriter
from ascendbench.job.resume import finished_record
from ascendbench.metrics.verdict import judge

TINY = ["model=tiny_flux2_decoder", "device=cpu", "preset.height=32", "preset.width=32"]
RULES = {"mean_rel_err": {"max": 0.01}, "cosine": {"min": 0.99}}


def _plant(job_dir, cfg, values, edit=None):
    """An ok record of ``cfg``, its metrics ``values`` judged by the real rules, then edited."""
    writer = RecordWriter(job_dir, OmegaConf.to_container(cfg, resolve=True))
    writer.data["outputs"] = {"image": {"shape": [1, 3, 32, 32], "dtype": "float32"}}
    writer.data["metrics"] = {k: {"value": v, **judge(v, RULES[k])} for k, v in values.items()}
    writer.data["verdict"] = "FAIL" if any(
        m["verdict"] == "FAIL" for m in writer.data["metrics"].values()) else "PASS"
    if edit:
        edit(writer.data)
    writer.finish("ok")


def _all_pass(record):
    record["verdict"] = "PASS"
    for entry in record["metrics"].values():
        entry["verdict"] = "PASS"


def _dry_run_edited_to_a_job(record):
    """A dry run's record (a plan, no outputs, no metrics) whose config says it was no dry run."""
    record.update(plan={"problems": []}, metrics={}, verdict=None)
    record.pop("outputs")


CASES = {
    "fail-edited-to-pass": ({"mean_rel_err": 0.5, "cosine": 0.2}, _all_pass,
                            "'mean_rel_err' says PASS but holds 0.5, beyond <= 0.01"),
    "nan-values-with-pass": ({"mean_rel_err": float("nan"), "cosine": float("nan")}, _all_pass,
                             "says PASS but holds no value (NaN)"),
    "dry-run-as-a-job": ({}, _dry_run_edited_to_a_job, "a dry run's record"),
    "another-schema": ({"mean_rel_err": 0.001}, lambda r: r.update(schema=2),
                       "of schema 2, this ascendbench writes 1"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_record_that_its_values_do_not_back_runs_again(compose_cfg, tmp_path, caplog, case):
    values, edit, reason = CASES[case]
    cfg = compose_cfg(TINY)
    _plant(tmp_path, cfg, values, edit)
    with caplog.at_level(logging.INFO, logger="ascendbench.job.resume"):
        assert finished_record(cfg, tmp_path) is None, case
    lines = [r.getMessage() for r in caplog.records if "running again" in r.getMessage()]
    assert len(lines) == 1 and reason in lines[0], caplog.text


@pytest.mark.parametrize("values", [{"mean_rel_err": 0.001, "cosine": 0.999},
                                    {"mean_rel_err": 0.5, "cosine": 0.999}], ids=["pass", "fail"])
def test_an_honest_record_is_still_resumed(compose_cfg, tmp_path, values):
    """An honest PASS and an honest FAIL are finished jobs: both skipped."""
    cfg = compose_cfg(TINY)
    _plant(tmp_path, cfg, values)
    assert finished_record(cfg, tmp_path) is not None
