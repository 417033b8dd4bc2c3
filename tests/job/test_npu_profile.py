"""Reading torch_npu's profiler output (ASCEND_PROFILER_OUTPUT CSVs, columns from the wheel
manifests)."""

from __future__ import annotations

import csv

import pytest

from ascendbench.job.profiling import npu_section

from helpers.fake_torch_npu import load_manifest, manifest_versions


def _write(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        csv.writer(handle).writerows([header, *rows])


@pytest.mark.parametrize("version", manifest_versions())
def test_operators_are_grouped_by_name_and_shapes_and_ranked_by_device_self_time(tmp_path, version):
    layout = load_manifest(version)["profiler"]
    run_dir = tmp_path / layout["run_dir_format"]["value"].format("host_1", "20261201120000000")
    out = run_dir / layout["output_dir"]["value"]
    columns = layout["operator_details.csv"]["value"]
    row = dict.fromkeys(columns, "0")

    def op(name, shapes, device_us):
        return [{**row, "Name": name, "Input Shapes": shapes,
                 "Device Self Duration(us)": device_us}[c]
                for c in columns]

    _write(out / "operator_details.csv", columns,
           [op("aten::conv2d", "[1, 4, 8, 8];\r\n[4, 4, 3, 3]", "30"),
                                                   op("aten::conv2d",
                                                      "[1, 4, 8, 8];\r\n[4, 4, 3, 3]", "30"),
                                                   op("aten::add", "[1];\r\n[1]", "20"),
                                                   op("aten::view", "", "0")])
    stats = layout["op_statistic.csv"]["value"]
    _write(out / "op_statistic.csv", stats,
           [[{"OP Type": "Conv2D", "Count": "4", "Total Time(us)": "60"}.get(c, "0")
                                              for c in stats]])
    section, total_ms = npu_section(run_dir, tmp_path, calls=2, top=5)
    assert [r["name"] for r in section["top"]] == ["aten::conv2d",
                                                   "aten::add"], "zero device time is left out"
    conv = section["top"][0]
    assert conv["calls"] == 1.0
    assert conv["total_ms"] == 0.03
    assert conv["input_shapes"] == [[1, 4, 8, 8], [4, 4, 3, 3]]
    assert total_ms == 0.04 and conv["share"] == 0.75
    assert section["kernel_types"] == [{"type": "Conv2D", "calls": 2.0, "total_ms": 0.03}]
    assert section["ascend_pt"] == run_dir.name and "kernel_details.csv" not in section["csv"]


def test_no_operator_file_is_said_not_hidden(tmp_path):
    section, total_ms = npu_section(None, tmp_path, calls=1, top=5)
    assert section["top"] == [] and total_ms == 0.0
    assert "wrote no ASCEND_PROFILER_OUTPUT/operator_details.csv" in section["missing"]
