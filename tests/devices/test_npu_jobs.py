"""Whole jobs with ``device=npu`` on the manifest-built torch_npu (helpers/fake_torch_npu.py): out
of memory, a CPU fallback seen through fd 2 in the second job of one process, and the profiler's own
CSV files."""

from __future__ import annotations

import csv
import multiprocessing
import types

import pytest

from ascendbench.errors import ConfigError
from ascendbench.job import placement
from ascendbench.job.profiling import profile_calls
from ascendbench.tasks.vae_decode import VaeDecodeTask

from helpers import fake_torch_npu, read_record

NPU_JOB = ["model=tiny_flux2_decoder", "preset.height=32", "preset.width=32", "preset.warmup=0",
           "preset.iters=2",
           "device=npu", "device._target_=helpers.fake_torch_npu.HostTensorNpuAdapter",
           "baseline.enabled=false",
           "bench.flops.enabled=false", "compare.visual.enabled=false", "artifacts.media=false",
           "artifacts.tensors=false"]


@pytest.fixture
def fake_npu(monkeypatch):
    """torch_npu 2.9.0 (built for CANN 8.x) as ``import torch_npu`` finds it; a fresh process-wide
    memory of warnings (the fake's warn-once set and the placement check's record of fallbacks)."""
    monkeypatch.setattr(fake_torch_npu, "_WARNED_OPS", set())
    monkeypatch.setattr(placement, "_FALLBACKS_SEEN", set())
    return fake_torch_npu.install(monkeypatch, "2.9.0")


def test_the_npu_oom_runtime_error_is_reason_oom_with_the_memory_hint(cli, fake_npu):
    fake_npu.oom_on_synchronize = 2 * 2**30
    result, job = cli(*NPU_JOB)
    assert result.returncode != 0
    record = read_record(job)
    assert record["status"] == "failed" and record["error"]["reason"] == "oom", record["error"]
    message = record["error"]["message"]
    assert "builtins.RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB" in message, (
        message)
    assert ("out of memory on npu" in message
            and "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True" in message)
    assert "Traceback" not in result.output


@pytest.fixture
def falling_back(fake_npu, monkeypatch):
    """The decoder's task runs an operator without an NPU kernel: torch_npu's line on fd 2, once per
    process."""
    run = VaeDecodeTask.run

    def with_fallback(self, model, inputs):
        fake_npu.cpu_fallback("aten::_unique2")
        return run(self, model, inputs)

    monkeypatch.setattr(VaeDecodeTask, "run", with_fallback)
    return fake_npu


def test_a_fallback_on_fd2_fails_placement_in_the_first_and_the_second_job_of_a_process(
        cli, falling_back, tmp_path, capfd):
    rule = "+model.thresholds.placement_findings={max:0,source:test}"
    first, first_dir = cli(*NPU_JOB, rule, job_dir=tmp_path / "first")
    warned = capfd.readouterr().err
    assert warned.count("CAUTION: The operator 'aten::_unique2' is not currently supported") == 1, (
        warned)
    second, second_dir = cli(*NPU_JOB, rule, job_dir=tmp_path / "second")
    assert "CAUTION" not in capfd.readouterr().err, "torch_npu warns once per operator per process"
    for result, job in ((first, first_dir), (second, second_dir)):
        record = read_record(job)
        assert result.returncode == 1, result.output[-2000:]
        assert record["placement_check"]["fallback_ops"] == ["aten::_unique2"]
        assert (record["metrics"]["placement_findings"]["verdict"] == "FAIL"
                and record["verdict"] == "FAIL")
    assert read_record(first_dir)["placement_check"]["fallback_ops_earlier_in_process"] == []
    check = read_record(second_dir)["placement_check"]
    assert check["fallback_ops_earlier_in_process"] == ["aten::_unique2"]
    assert "earlier job of this process" in check["findings"][0]


def test_profile_on_npu_reads_the_top_operators_from_torch_npus_csv_files(cli, fake_npu):
    result, job = cli(*NPU_JOB, "profile.enabled=true", "profile.calls=2", "profile.top=5")
    assert result.returncode == 0, result.output[-3000:]
    profile = read_record(job)["profile"]
    assert profile["clock"] == "device" and 0 < len(profile["top"]) <= 5
    assert any("conv" in row["name"] for row in profile["top"]), profile["top"]
    convs = [row for row in profile["top"] if "convolution" in row["name"]]
    assert convs and all(len(row["input_shapes"][0]) == 4 for row in convs), (
        "NCHW input parsed from the CSV")
    assert (profile["ops_total_ms_per_call"] > 0
            and abs(sum(r["share"] for r in profile["top"]) - 1.0) <= 1.0)
    run_dir = job / profile["ascend_pt"]
    assert run_dir.name.endswith("_ascend_pt") and run_dir.is_dir(), "kept for MindStudio Insight"
    columns = fake_npu.manifest["profiler"]["operator_details.csv"]["value"]
    with open(job / profile["csv"]["operator_details.csv"], newline="") as handle:
        assert next(csv.reader(handle)) == columns
    assert profile["kernel_types"] and (job / profile["trace"]).is_file()


def test_the_npu_profiler_has_no_key_averages():
    profiler = fake_torch_npu.FakeNpu("2.9.0").modules["torch_npu.profiler"]
    prof = profiler.profile(activities=[profiler.ProfilerActivity.CPU])
    with pytest.raises(AttributeError, match="key_averages"):
        prof.key_averages()
    with pytest.raises(AttributeError, match="no attribute 'npu_not_a_function'"):
        fake_torch_npu.FakeNpu("2.9.0").modules["torch_npu"].npu_not_a_function  # noqa: B018


@pytest.mark.parametrize("version", fake_torch_npu.manifest_versions())
def test_the_adapter_uses_only_what_each_torch_npu_has(monkeypatch, version):
    from ascendbench.devices.adapter import DeviceAdapter

    fake = fake_torch_npu.install(monkeypatch, version, device_name="Ascend910B3")
    # the real loader: import torch_npu, torch.npu
    adapter = DeviceAdapter("npu", index=1, jit_compile=False)
    adapter.reset_peak_memory()
    start, end = adapter.new_event(), adapter.new_event()
    start.record()
    end.record()
    adapter.synchronize()
    assert start.elapsed_time(end) >= 0 and ("synchronize", 1) in fake.calls
    info = adapter.info()
    assert info["name"] == "Ascend910B3" and info["total_memory_gb"] == 64.0
    assert fake.modules["torch_npu.npu"].matmul.allow_hf32 is False
    has_probe = "is_jit_compile_false" in fake.manifest["modules"]["torch_npu.npu"]["names"]
    assert info["jit_compile"] is (False if has_probe else None)
    assert adapter.peak_memory_mb()["peak_allocated_mb"] == 0.0


def test_hf32_and_cube_math_type_are_recorded_as_read_back(monkeypatch):
    """The record holds what the runtime reports after setup, not what was asked: a runtime that
    keeps HF32 on (a planted option that ignores the setter) and a cube_math_type set before the
    job (torch_npu >= 2.9 reads CUBE_MATH_TYPE, which can override allow_hf32) both show."""
    from ascendbench.devices.adapter import DeviceAdapter

    fake = fake_torch_npu.install(monkeypatch, "2.9.0", device_name="Ascend910B3")
    npu = fake.modules["torch_npu.npu"]
    assert DeviceAdapter("npu").info()["precision_switches"] == {
        "npu.matmul.allow_hf32": False, "npu.conv.allow_hf32": False}

    class KeepsHf32(type(npu.conv)):
        def __setattr__(self, attr, value):
            pass  # the runtime keeps its own value

    conv = KeepsHf32(["allow_hf32"], fake_torch_npu.UNSET["npu_config._allowHF32Conv"])
    monkeypatch.setattr(npu, "conv", conv)
    npu.matmul.values["cube_math_type"] = types.SimpleNamespace(name="KEEP_DTYPE")
    switches = DeviceAdapter("npu").info()["precision_switches"]
    assert switches == {"npu.matmul.allow_hf32": False, "npu.conv.allow_hf32": True,
                        "npu.matmul.cube_math_type": "KEEP_DTYPE"}


@pytest.fixture
def start_method():
    """The process's multiprocessing start method, put back after the test."""
    method = multiprocessing.get_start_method(allow_none=True)
    yield method
    multiprocessing.set_start_method(method, force=True)


@pytest.mark.parametrize("version", fake_torch_npu.manifest_versions())
def test_every_job_of_a_profiled_sweep_gets_its_operator_table(cli, monkeypatch, start_method,
                                                              version):
    """Sweep job dirs are named by their overrides (``=`` and ``,``), which torch_npu's path check
    refuses up to 2.9.0; its analysis switches the process to ``fork``."""
    fake_torch_npu.install(monkeypatch, version)
    result, sweep = cli("-m", *NPU_JOB, "dtype=float16,bfloat16", "profile.enabled=true",
                        "profile.calls=1")
    assert result.returncode == 0, result.output[-3000:]
    jobs = sorted(path.parent for path in sweep.rglob("record.json"))
    assert len(jobs) == 2 and all("=" in job.name for job in jobs), jobs
    for job in jobs:
        profile = read_record(job)["profile"]
        assert profile["top"] and "missing" not in profile, (job.name, profile)
        assert (job / profile["ascend_pt"]).is_dir() and profile["ascend_pt"].endswith("_ascend_pt")
    assert multiprocessing.get_start_method(allow_none=True) == start_method


def test_profiling_in_a_daemon_process_is_refused_with_a_clear_error(monkeypatch, tmp_path):
    fake_torch_npu.install(monkeypatch, "2.9.0")
    monkeypatch.setattr(multiprocessing, "current_process",
                        lambda: types.SimpleNamespace(daemon=True, name="worker"))
    adapter = types.SimpleNamespace(name="npu", synchronize=lambda: None)
    settings = types.SimpleNamespace(calls=1, top=5, trace=False)
    with pytest.raises(ConfigError, match="cannot analyse its data in a daemon process"):
        profile_calls(lambda: None, adapter, settings, tmp_path)


@pytest.mark.parametrize("env", [{"TORCH_NPU_DISABLED_WARNING": "1"}, {"RANK": "1"}])
def test_a_silenced_fallback_warning_is_not_observable_never_pass(cli, falling_back, env,
                                                                  capfd):
    rule = "+model.thresholds.placement_findings={max:0,source:test}"
    result, job = cli(*NPU_JOB, rule, env=env)
    assert "CAUTION" not in capfd.readouterr().err, "torch_npu prints nothing under " + str(env)
    record = read_record(job)
    entry, check = record["metrics"]["placement_findings"], record["placement_check"]
    assert check["fallback_ops"] == [] and entry["verdict"] == "WARN", entry
    name, value = next(iter(env.items()))
    assert check["fallback_warning_env"][name] == value
    assert f"{name}={value}: torch_npu prints no CPU-fallback warning" in entry["not_observable"]


def test_a_device_env_value_the_runtime_did_not_start_with_fails_that_job(cli, fake_npu,
                                                                         tmp_path):
    """Two jobs of one process (a basic-launcher sweep over expandable_segments): the second
    value never applies, so its job fails naming both values instead of recording it."""
    conf = "+device.env.PYTORCH_NPU_ALLOC_CONF=expandable_segments:"
    first, first_dir = cli(*NPU_JOB, conf + "True", job_dir=tmp_path / "first")
    assert first.returncode == 0, first.output[-2000:]
    second, second_dir = cli(*NPU_JOB, conf + "False", job_dir=tmp_path / "second")
    record = read_record(second_dir)
    assert second.returncode != 0 and record["status"] == "failed"
    assert ("PYTORCH_NPU_ALLOC_CONF=expandable_segments:False (started with "
            "expandable_segments:True)" in record["error"]["message"]), record["error"]
    again, again_dir = cli(*NPU_JOB, conf + "True", job_dir=tmp_path / "again")
    assert again.returncode == 0 and read_record(again_dir)["status"] == "ok"
