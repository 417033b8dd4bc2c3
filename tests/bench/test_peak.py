"""The peak TFLOP/s table: sources, matching by the runtime's device name, user overrides."""

from __future__ import annotations

import pytest

from ascendbench.bench.peak import match_entry, peak_tflops

DTYPES = ("float32", "tf32", "float16", "bfloat16")


@pytest.fixture
def peak(compose_cfg):
    return compose_cfg(["device=npu"]).device.peak


def test_every_entry_has_a_source_and_positive_figures(peak):
    for name, entry in peak.table.items():
        assert entry.source and len(entry.source) > 40, f"{name} needs a real source"
        figures = {k: entry[k] for k in DTYPES if entry.get(k) is not None}
        assert figures and all(v > 0 for v in figures.values()), name
        assert entry.match, name


@pytest.mark.parametrize("device_name, dtype, tflops, entry", [
    ("NVIDIA H200", "bfloat16", 989.4, "H200"),
    ("NVIDIA H100 80GB HBM3", "float16", 989.4, "H100_SXM"),
    ("NVIDIA H100 PCIe", "bfloat16", 756.5, "H100_PCIe"),
    ("NVIDIA A100-SXM4-80GB", "bfloat16", 312.0, "A100"),
    ("Ascend910B4", "float16", 245.76, "Ascend910B4"),
    ("Ascend910B4", "bfloat16", 245.76, "Ascend910B4"),
])
def test_the_runtime_device_name_picks_the_entry(peak, device_name, dtype, tflops, entry):
    got = peak_tflops(peak, device_name, dtype)
    assert (got["tflops"], got["entry"]) == (tflops, entry) and got["source"]


def test_longest_match_wins_whatever_the_order():
    table = {"short": {"match": ["H100"]}, "long": {"match": ["H100 PCIe"]}}
    assert match_entry(table, "NVIDIA H100 PCIe")[0] == "long"
    assert match_entry(dict(reversed(list(table.items()))), "NVIDIA H100 PCIe")[0] == "long"
    assert match_entry(table, "nvidia h100 80gb")[0] == "short", "matching ignores case"
    assert match_entry(table, "AMD EPYC") is None


def test_float32_with_tf32_allowed_uses_the_tf32_figure(peak):
    assert peak_tflops(peak, "NVIDIA H200", "float32")["tflops"] == 66.9
    assert peak_tflops(peak, "NVIDIA H200", "float32", reduced_fp32=True)["tflops"] == 494.7


def test_user_override_wins(compose_cfg):
    peak = compose_cfg(["device=cuda", "device.peak.override.bfloat16=700"]).device.peak
    got = peak_tflops(peak, "NVIDIA H200", "bfloat16")
    assert got["tflops"] == 700.0 and "override" in got["source"]
    assert peak_tflops(peak, "NVIDIA H200", "float16")["tflops"] == 989.4, "other dtypes keep the table"


def test_a_user_entry_can_be_added_on_the_command_line(compose_cfg):
    peak = compose_cfg(["device=npu", "+device.peak.table.Ascend910B3={match: [Ascend910B3], bfloat16: 313, "
                                      "source: my vendor sheet}"]).device.peak
    assert peak_tflops(peak, "Ascend910B3", "bfloat16")["tflops"] == 313.0


def test_missing_figures_say_how_to_provide_them(peak):
    cpu = peak_tflops(peak, "AMD EPYC 7B13", "float32")
    assert cpu["tflops"] is None and "device.peak.override.float32" in cpu["missing"]
    no_fp32 = peak_tflops(peak, "Ascend910B4", "float32")
    assert no_fp32["tflops"] is None and no_fp32["entry"] == "Ascend910B4" and "has no float32" in no_fp32["missing"]
    assert peak_tflops(None, "x", "float16")["tflops"] is None
