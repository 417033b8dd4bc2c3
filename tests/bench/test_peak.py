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
        derive = entry.get("derive")
        assert figures or derive is not None, name
        assert all(v > 0 for v in figures.values()), name
        assert entry.get("match") or entry.get("names"), name


@pytest.mark.parametrize("device_name, dtype, tflops, entry", [
    ("NVIDIA H200", "bfloat16", 989.4, "H200"),
    ("NVIDIA H100 80GB HBM3", "float16", 989.4, "H100_SXM"),
    ("NVIDIA H100 PCIe", "bfloat16", 756.5, "H100_PCIe"),
    ("NVIDIA A100-SXM4-80GB", "bfloat16", 312.0, "A100"),
    ("Ascend910B4", "float16", 245.76, "Ascend910B4"),
    ("Ascend910B4", "bfloat16", 245.76, "Ascend910B4"),
    ("Ascend910B4-1", "bfloat16", 245.76, "Ascend910B4-1"),
    ("Ascend910B2", "float16", 353.894, "Ascend910B2"),  # 24 x 4096 x 2 x 1.8 GHz
    ("Ascend910A", "float16", 256.0, "Ascend910A"),
])
def test_the_runtime_device_name_picks_the_entry(peak, device_name, dtype, tflops, entry):
    got = peak_tflops(peak, device_name, dtype)
    assert got["tflops"] == pytest.approx(tflops, abs=1e-3)
    assert got["entry"] == entry and got["source"]


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
    assert peak_tflops(peak, "NVIDIA H200",
                       "float16")["tflops"] == 989.4, "other dtypes keep the table"


def test_a_user_entry_can_be_added_on_the_command_line(compose_cfg):
    peak = compose_cfg(["device=npu", "+device.peak.table.MyCard={match: [MyCard], bfloat16: 313, "
                                      "source: my vendor sheet}"]).device.peak
    assert peak_tflops(peak, "MyCard v2", "bfloat16")["tflops"] == 313.0


def test_missing_figures_say_how_to_provide_them(peak):
    cpu = peak_tflops(peak, "AMD EPYC 7B13", "float32")
    assert cpu["tflops"] is None and "device.peak.override.float32" in cpu["missing"]
    no_fp32 = peak_tflops(peak, "Ascend910B4", "float32")
    assert no_fp32["tflops"] is None
    assert no_fp32["entry"] == "Ascend910B4"
    assert "has no float32" in no_fp32["missing"]
    unknown = peak_tflops(peak, "Ascend910B9", "float16")
    assert unknown["tflops"] is None
    assert "'Ascend910B9'" in unknown["missing"], "an unknown chip is named"
    no_clock = peak_tflops(peak, "Ascend910_9362", "bfloat16")
    assert no_clock["tflops"] is None and "platform_config" in no_clock["missing"]
    assert peak_tflops(None, "x", "float16")["tflops"] is None


# Every A2/A3 SoC name of torch_npu's NpuVariables.cpp:25-41 (master; the same names are in the
# strings of libtorch_npu.so of torch_npu 2.9.0 and 2.14.0).
A2_A3 = ("Ascend910B1", "Ascend910B2", "Ascend910B2C", "Ascend910B3", "Ascend910B4",
         "Ascend910B4-1",
         "Ascend910_9391", "Ascend910_9392", "Ascend910_9381", "Ascend910_9382", "Ascend910_9372",
         "Ascend910_9362", "Ascend910_9363")


def test_every_a2_and_a3_name_has_its_own_exact_entry(peak):
    for name in A2_A3:
        entry_name, entry = match_entry(peak.table, name)
        assert name in entry.names, f"{name} is matched by {entry_name} without being declared"


def test_a_prefix_never_takes_a_longer_name():
    """The planted fault the exact match prevents: without its own row, Ascend910B4-1 is unknown,
    not a 910B4."""
    table = {"Ascend910B4": {"names": ["Ascend910B4"], "float16": 1.0, "source": "x"}}
    assert match_entry(table, "Ascend910B4-1") is None
    assert match_entry({"old": {"match": ["Ascend910B4"]}},
                       "Ascend910B4-1")[0] == "old", "what substrings did"


def test_the_runtime_core_count_and_the_host_cann_file_replace_the_table(peak):
    with_cores = peak_tflops(peak, "Ascend910B4", "float16", chip={"cube_core_num": 10})
    assert with_cores["tflops"] == 122.88 and "cube_core_num" in with_cores["source"]
    platform = {"path": "/x/Ascend910_9362.ini", "cube_cores": 24, "cube_clock_ghz": 1.65,
                "macs_per_cycle": 4096}
    got = peak_tflops(peak, "Ascend910_9362", "bfloat16", chip={"platform_config": platform})
    assert got["tflops"] == pytest.approx(24 * 4096 * 2 * 1.65e9 / 1e12)
    assert "/x/Ascend910_9362.ini" in got["source"]
