"""The chip's cube figures from the host's CANN ``platform_config/<SoC>.ini``, and an A3 name
getting an MFU.

The ini below has the sections and keys of CANN's own files as third-party parsers and kernel notes
quote them (``[SoCInfo] ai_core_cnt / cube_core_cnt``, ``[AICoreSpec] cube_freq`` in MHz,
``[DtypeMKN] Default=16,16,16``).
"""

from __future__ import annotations

import pytest

from ascendbench.bench.flops import FlopCount, flops_section
from ascendbench.bench.peak import peak_tflops
from ascendbench.devices import runtime
from ascendbench.devices.adapter import DeviceAdapter
from ascendbench.devices.npu import find_platform_ini, platform_figures

from helpers.npu_fake import FakeNpu

INI = """[version]
SoC_version={soc}
Short_SoC_version=Ascend910_93

[SoCInfo]
ai_core_cnt={cores}
cube_core_cnt={cores}
vector_core_cnt={vectors}
support_bf16=1

[AICoreSpec]
cube_freq={mhz}
cube_m_size=16
cube_n_size=16
cube_k_size=16

[DtypeMKN]
Default=16,16,16
DT_INT8=16,32,16
"""


def _toolkit(root, soc="Ascend910_9362", cores=20, mhz=1600):
    config = root / "aarch64-linux" / "data" / "platform_config"
    config.mkdir(parents=True)
    (config / f"{soc}.ini").write_text(INI.format(soc=soc, cores=cores, vectors=2 * cores, mhz=mhz))
    return root


def test_the_ini_gives_cores_clock_and_cube_shape(tmp_path):
    root = _toolkit(tmp_path / "toolkit")
    figures = platform_figures("Ascend910_9362", roots=[root])
    assert (figures["cube_cores"] == 20 and figures["cube_clock_ghz"] == 1.6
            and figures["macs_per_cycle"] == 4096)
    assert platform_figures("Ascend910_9392", roots=[root]) is None, (
        "another SoC's file is never used")
    assert find_platform_ini("../aarch64-linux/data/platform_config/Ascend910_9362",
                             roots=[root]) is None


def test_an_a3_name_gets_an_mfu_from_the_host_cann_file(tmp_path, monkeypatch, compose_cfg):
    monkeypatch.setenv("ASCEND_HOME_PATH", str(_toolkit(tmp_path / "toolkit")))
    fake = FakeNpu(names=("Ascend910_9362",), cube_core_num=None)
    monkeypatch.setitem(runtime.RUNTIMES, "npu",
                        runtime.RuntimeSpec(lambda: fake, "missing", "no device"))
    adapter = DeviceAdapter("npu")
    peak = peak_tflops(compose_cfg(["device=npu"]).device.peak, adapter.device_name(), "bfloat16",
                       chip=adapter.chip_options)
    assert (peak["tflops"] == pytest.approx(20 * 4096 * 2 * 1.6e9 / 1e12)
            and peak["entry"] == "Ascend910_93")
    section = flops_section(FlopCount(flops=10**12), median_ms=10.0, peak=peak, dtype="bfloat16")
    assert (section["mfu"] == pytest.approx(100.0 / peak["tflops"])
            and "Ascend910_9362.ini" in section["peak_source"])


def test_without_the_file_the_a3_name_is_named_and_gets_no_mfu(tmp_path, monkeypatch, compose_cfg):
    monkeypatch.setenv("ASCEND_HOME_PATH", str(tmp_path / "empty"))
    fake = FakeNpu(names=("Ascend910_9362",), cube_core_num=None)
    monkeypatch.setitem(runtime.RUNTIMES, "npu",
                        runtime.RuntimeSpec(lambda: fake, "missing", "no device"))
    adapter = DeviceAdapter("npu")
    if adapter.chip_options["platform_config"] is not None:
        pytest.skip(f"this host has CANN: {adapter.chip_options['platform_config']['path']}")
    peak = peak_tflops(compose_cfg(["device=npu"]).device.peak, adapter.device_name(), "bfloat16",
                       chip=adapter.chip_options)
    assert (peak["tflops"] is None and "'Ascend910_9362'" in peak["missing"]
            and "platform_config" in peak["missing"])
