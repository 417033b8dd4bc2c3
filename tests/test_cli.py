"""The CLI end to end, in subprocesses, with tiny offline models."""

from __future__ import annotations

import json

import torch
from safetensors.torch import load_file

from ascendbench.metrics import regression_metrics

from conftest import TINY_RUN


def _record(job_dir):
    return json.loads((job_dir / "record.json").read_text())


def test_job_from_a_local_model_directory_records_metrics_that_recompute(cli, tiny_flux2_dir):
    result, job = cli("model=tiny_flux2_decoder", f"model.source={tiny_flux2_dir}", "model.weights=required",
                      *TINY_RUN)
    assert result.returncode == 0, result.stdout + result.stderr
    record = _record(job)
    assert record["status"] == "ok" and record["error"] is None
    assert record["weights"]["kind"] == "loaded" and record["weights"]["digest"].startswith("sha256:")
    assert record["job"]["device"] == "cpu" and record["job"]["dtype"] == "float32"
    assert record["baseline"]["precision"] == "float64", "a float32 run is judged against float64"
    assert record["verdict"] == "PASS"
    assert record["metrics"]["mean_rel_err"]["threshold"] == 0.01
    assert "FLUX.2" in record["metrics"]["mean_rel_err"]["source"]
    for key in ("mean_ms", "median_ms", "min_ms", "max_ms", "p90_ms", "p95_ms"):
        assert record["bench"]["latency"][key] > 0
    assert record["bench"]["throughput"]["unit"] == "images/s"
    for lib in ("torch", "diffusers", "transformers"):
        assert record["env"]["libraries"][lib]
    assert record["config"]["model"]["source"] == str(tiny_flux2_dir)

    reference = load_file(job / record["artifacts"]["reference_outputs"])["image"]
    device = load_file(job / record["artifacts"]["device_outputs"])["image"]
    assert reference.dtype == torch.float64 and device.shape == (1, 3, 32, 32)
    recomputed = regression_metrics(reference, device)  # the metrics below do not depend on atol/rtol
    for name in ("mae", "mse", "max_abs_err", "mean_rel_err", "cosine", "psnr_db"):
        assert abs(recomputed[name] - record["metrics"][name]["value"]) <= 1e-12 * max(1.0, abs(recomputed[name]))
    for png in record["artifacts"]["image_device_png"] + record["artifacts"]["image_reference_png"]:
        assert (job / png).stat().st_size > 0
    assert "ascendbench summary" in result.stdout and "PASS" in result.stdout


def test_random_init_is_labelled_in_record_and_summary(cli):
    result, job = cli("model=tiny_flux2_decoder", *TINY_RUN)
    assert result.returncode == 0, result.stderr
    record = _record(job)
    assert record["weights"]["kind"] == "random-init" and record["weights"]["init_seed"] == 42
    assert any("random-init" in w for w in record["warnings"])
    assert "random-init" in result.stdout


def test_unavailable_device_fails_with_a_paragraph_and_a_failed_record(cli):
    result, job = cli("model=tiny_flux2_decoder", *TINY_RUN[:-1], "device=npu")
    assert result.returncode == 1
    output = result.stdout + result.stderr
    assert "device=npu is not available" in output and "torch_npu" in output
    assert "Traceback" not in output, "tracebacks belong in the job log only"
    record = _record(job)
    assert record["status"] == "failed"
    assert record["error"]["type"] == "DeviceUnavailableError" and record["error"]["reason"] == "device_unavailable"
    assert "Traceback" in (job / "ascendbench.log").read_text()


def test_required_weights_missing_fails_cleanly(cli, tmp_path):
    result, job = cli("model=tiny_flux2_decoder", f"model.source={tmp_path}/absent", "model.weights=required",
                      *TINY_RUN)
    assert result.returncode == 1
    assert "model.weights=required but no weights were found" in result.stdout + result.stderr
    assert _record(job)["error"]["reason"] == "weights_not_found"


def test_half_dtype_on_cpu_runs_with_the_measured_warning(cli):
    result, job = cli("model=tiny_flux2_decoder", *TINY_RUN, "dtype=bfloat16")
    assert result.returncode == 0, result.stderr
    record = _record(job)
    assert record["job"]["dtype"] == "bfloat16" and record["baseline"]["precision"] == "float32"
    assert any("170x slower" in w for w in record["warnings"])


def test_help_lists_groups_and_options(tmp_path):
    from conftest import run_cli

    result = run_cli(["--help"], cwd=tmp_path)
    assert result.returncode == 0
    for line in ("device: auto, cpu, cuda, npu", "dtype: auto, bfloat16, float16, float32",
                 "preset: balanced, mini, quality"):
        assert line in result.stdout
    assert "tiny_flux2_decoder" in result.stdout and "flux2_small_decoder" in result.stdout


def test_unknown_option_gets_hydras_list_of_options(tmp_path):
    from conftest import run_cli

    result = run_cli(["device=tpu"], cwd=tmp_path)
    assert result.returncode == 1
    assert "Could not find 'device/tpu'" in result.stderr and "auto" in result.stderr and "npu" in result.stderr


def test_fail_on_turns_a_failed_verdict_into_exit_1(cli):
    strict = "+metric.thresholds.mean_rel_err={max:1e-12,source:test}"
    passed, _ = cli("model=tiny_flux2_decoder", *TINY_RUN, strict, "baseline.process=in-process")
    assert passed.returncode == 0, "a FAIL verdict alone is a result, not an error"
    gated, job = cli("model=tiny_flux2_decoder", *TINY_RUN, strict, "baseline.process=in-process", "fail_on=FAIL",
                     "resume.enabled=false")
    assert gated.returncode == 1 and _record(job)["verdict"] == "FAIL"
    wrong, _ = cli("model=tiny_flux2_decoder", *TINY_RUN, "fail_on=maybe")
    assert wrong.returncode == 1 and "fail_on='maybe' is not allowed" in wrong.stderr


def test_tensor_artifacts_are_bounded_by_config(cli):
    result, job = cli("model=tiny_flux2_decoder", *TINY_RUN, "artifacts.max_tensor_mb=0", "baseline.process=in-process")
    assert result.returncode == 0, result.stderr
    artifacts = _record(job)["artifacts"]
    assert "exceed artifacts.max_tensor_mb=0;" in artifacts["tensors_skipped"]
    assert "device_outputs" not in artifacts and not (job / "tensors").exists()
    assert artifacts["image_device_png"], "pictures are still written"
