"""Cross-machine comparison: device error / reference-device error with limits, latency ratios."""

from __future__ import annotations

import math

from ascendbench.report.crossdevice import crossdevice_section, ratio
from ascendbench.report.gather import load_row

LIMITS = {"rmse": 2.0, "mean_rel_err": 2.0, "max_rel_err": 10.0}


def test_ratio_edge_cases():
    assert ratio(0.0, 0.0) == 1.0
    assert math.isinf(ratio(1e-3, 0.0))
    assert ratio(3.0, 2.0) == 1.5


def test_npu_error_is_judged_against_the_gpu_error(write_record, tmp_path):
    rows = [load_row(write_record("npu", device="npu", host="npu-box", mean_rel_err=0.006,
                                  rmse=3e-4, median_ms=20.0)),
            load_row(write_record("gpu", device="cuda", host="gpu-box", mean_rel_err=0.002,
                                  rmse=2e-4, median_ms=10.0)),
            load_row(write_record("cpu", device="cpu", host="npu-box", median_ms=9000.0))]
    text = crossdevice_section(rows, "cuda", LIMITS, tmp_path)
    lines = text.splitlines()
    mre = next(line for line in lines if "| mean_rel_err |" in line)
    assert "| 0.006 | 0.002 | 3 | 2 | FAIL |" in mre
    rmse = next(line for line in lines if "| rmse |" in line)
    assert "| 0.0003 | 0.0002 | 1.5 | 2 | PASS |" in rmse
    assert "| npu | 20 | 10 | 2 |" in text, "latency ratio npu / cuda"
    assert "| cpu | 9000 | 10 | 900 |" in text


def test_runs_on_other_inputs_do_not_line_up(write_record, tmp_path):
    rows = [load_row(write_record("npu", device="npu", inputs="sha256:aa")),
            load_row(write_record("gpu", device="cuda", inputs="sha256:bb"))]
    text = crossdevice_section(rows, "cuda", LIMITS, tmp_path)
    assert "no error ratio can be formed" in text
    assert ("1 accelerator run(s) have no cuda run with the same workload, inputs and weights"
            in text)


def test_missing_reference_device_is_said(write_record, tmp_path):
    rows = [load_row(write_record("npu", device="npu"))]
    text = crossdevice_section(rows, "cuda", LIMITS, tmp_path)
    assert text.startswith("No record ran on the reference device `cuda` (devices in the records: "
                           "npu)")
