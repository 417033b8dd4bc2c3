"""The CLI end to end with tiny offline models.

One job runs as users run it, ``python -m ascendbench`` in a subprocess with every default (its CPU
reference in a child process); the others call the same entry point in this process (``cli``
fixture, ``helpers.run_app``): Hydra's parsing, the app, the console and the exit code are the same,
without an interpreter start per job. Where a test is not about the reference process, its reference
runs in-process.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import subprocess
import sys

import diffusers
import hydra
import pytest
import torch
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from safetensors.torch import load_file

import ascendbench
from ascendbench.metrics.functional.regression import regression_metrics

from helpers import TINY_RUN, read_record, run_app, run_cli

IN_PROCESS_REFERENCE = "baseline.process=in-process"


@pytest.mark.slow
def test_job_from_a_local_model_directory_records_metrics_that_recompute(tmp_path, tiny_flux2_dir):
    result = run_cli(["model=tiny_flux2_decoder", f"model.source={tiny_flux2_dir}",
                      "model.weights=required",
                      *TINY_RUN], cwd=tmp_path)
    job = result.job_dir
    assert result.returncode == 0, result.stdout + result.stderr
    record = read_record(job)
    assert record["status"] == "ok" and record["error"] is None
    assert record["weights"]["kind"] == "loaded"
    assert record["weights"]["digest"].startswith("sha256:")
    assert record["job"]["device"] == "cpu" and record["job"]["dtype"] == "float32"
    assert record["baseline"]["precision"] == "float64", "a float32 run is judged against float64"
    # the default: the reference in a clean child process
    assert record["baseline"]["process"] == "child"
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
    # the metrics below do not depend on atol/rtol
    recomputed = regression_metrics(reference, device)
    for name in ("mae", "mse", "max_abs_err", "mean_rel_err", "cosine", "psnr_db"):
        tolerance = 1e-12 * max(1.0, abs(recomputed[name]))
        assert abs(recomputed[name] - record["metrics"][name]["value"]) <= tolerance
    for png in record["artifacts"]["image_device_png"] + record["artifacts"]["image_reference_png"]:
        assert (job / png).stat().st_size > 0
    assert "ascendbench summary" in result.stdout and "PASS" in result.stdout


def test_random_init_is_labelled_in_record_and_summary(cli):
    result, job = cli("model=tiny_flux2_decoder", *TINY_RUN, IN_PROCESS_REFERENCE)
    assert result.returncode == 0, result.stderr
    record = read_record(job)
    assert record["weights"]["kind"] == "random-init" and record["weights"]["init_seed"] == 42
    assert any("random-init" in w for w in record["warnings"])
    assert "random-init" in result.stdout


def test_unavailable_device_fails_with_a_paragraph_and_a_failed_record(cli):
    result, job = cli("model=tiny_flux2_decoder", *TINY_RUN[:-1], "device=npu")
    assert result.returncode == 1
    output = result.stdout + result.stderr
    assert "device=npu is not available" in output and "torch_npu" in output
    assert "Traceback" not in output, "tracebacks belong in the job log only"
    record = read_record(job)
    assert record["status"] == "failed"
    assert record["error"]["type"] == "DeviceUnavailableError"
    assert record["error"]["reason"] == "device_unavailable"
    assert "Traceback" in (job / "ascendbench.log").read_text()


def test_required_weights_missing_fails_cleanly(cli, tmp_path):
    result, job = cli("model=tiny_flux2_decoder", f"model.source={tmp_path}/absent",
                      "model.weights=required",
                      *TINY_RUN)
    assert result.returncode == 1
    assert "model.weights=required but no weights were found" in result.stdout + result.stderr
    assert read_record(job)["error"]["reason"] == "weights_not_found"


def test_half_dtype_on_cpu_runs_with_the_measured_warning(cli):
    result, job = cli("model=tiny_flux2_decoder", *TINY_RUN, "dtype=bfloat16", IN_PROCESS_REFERENCE,
                      "fail_on=null")
    assert result.returncode == 0, result.stderr
    record = read_record(job)
    assert record["job"]["dtype"] == "bfloat16" and record["baseline"]["precision"] == "float64"
    assert any("170x slower" in w for w in record["warnings"])


def test_help_lists_groups_and_options(tmp_path):
    result = run_app(["--help"], cwd=tmp_path)
    assert result.returncode == 0
    for line in ("device: auto, cpu, cuda, npu", "dtype: auto, bfloat16, float16, float32",
                 "preset: balanced, mini, quality"):
        assert line in result.stdout
    assert "tiny_flux2_decoder" in result.stdout and "flux2_small_decoder" in result.stdout


def test_unknown_option_gets_hydras_list_of_options(tmp_path):
    result = run_app(["device=tpu"], cwd=tmp_path)
    assert result.returncode == 1
    assert "Could not find 'device/tpu'" in result.stderr
    assert "auto" in result.stderr
    assert "npu" in result.stderr


def test_fail_on_turns_a_failed_verdict_into_exit_1(cli):
    strict = "+metric.thresholds.mean_rel_err={max:1e-12,source:test}"
    gated, job = cli("model=tiny_flux2_decoder", *TINY_RUN, strict, IN_PROCESS_REFERENCE)
    assert gated.returncode == 1
    assert read_record(job)["verdict"] == "FAIL", "fail_on=FAIL is the default"
    passed, _ = cli("model=tiny_flux2_decoder", *TINY_RUN, strict, IN_PROCESS_REFERENCE,
                    "fail_on=null",
                    "resume.enabled=false")
    assert passed.returncode == 0, "fail_on=null: a FAIL verdict alone is a result, not an error"
    wrong, _ = cli("model=tiny_flux2_decoder", *TINY_RUN, "fail_on=maybe")
    assert wrong.returncode == 1
    assert "Invalid value 'maybe', expected one of [WARN, FAIL]" in wrong.stderr


def test_tensor_artifacts_are_bounded_by_config(cli):
    result, job = cli("model=tiny_flux2_decoder", *TINY_RUN, "artifacts.max_tensor_mb=0",
                      IN_PROCESS_REFERENCE)
    assert result.returncode == 0, result.stderr
    artifacts = read_record(job)["artifacts"]
    assert "exceed artifacts.max_tensor_mb=0;" in artifacts["tensors_skipped"]
    assert "device_outputs" not in artifacts and not (job / "tensors").exists()
    assert artifacts["image_device_png"], "pictures are still written"


def test_an_in_process_run_leaves_the_process_as_it_found_it(tmp_path):
    """``run_app`` (used by the tests above) undoes what a job does to the process that ran it."""

    def state():
        root = logging.getLogger()
        return (os.getcwd(), dict(os.environ), list(sys.path), list(sys.argv), list(root.handlers),
                root.level,
                signal.getsignal(signal.SIGTERM), torch.are_deterministic_algorithms_enabled(),
                sys.stdout)

    before = state()
    result = run_app(["model=tiny_flux2_decoder", *TINY_RUN, "device.deterministic=true",
                      "model.weights=required",
                      f"model.source={tmp_path}/absent"], cwd=tmp_path,
                      env={"PYTHONPATH": str(tmp_path)})
    assert result.returncode == 1
    assert "model.weights=required but no weights were found" in result.output
    # the job switched it on
    assert read_record(result.job_dir)["env"]["device"]["deterministic"] is True
    assert "[ascendbench" in result.stdout, "the job's console log lines were captured"
    assert state() == before
    assert not GlobalHydra.instance().is_initialized() and not HydraConfig.initialized()


def test_version_prints_ascendbench_and_its_libraries_without_composing_a_job(cli):
    result, job = cli("--version")
    assert result.returncode == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"ascendbench {ascendbench.__version__}"
    named = dict(line.split(" ", 1) for line in lines[1:])
    assert set(named) == {"torch", "torch_npu", "diffusers", "hydra-core"}
    assert torch.__version__.startswith(named["torch"])
    assert named["diffusers"] == diffusers.__version__
    assert named["hydra-core"] == hydra.__version__
    assert "Hydra" not in result.stdout, "ours, not Hydra's"
    npu_installed = importlib.util.find_spec("torch_npu") is not None
    assert (named["torch_npu"] != "not installed") == npu_installed
    assert not job.exists(), "no job composed, nothing written"


def test_a_deleted_working_directory_is_one_paragraph_and_exit_2(tmp_path):
    """Before: Hydra's raw FileNotFoundError traceback from os.getcwd()."""
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f'cd "{gone}" && rmdir "{gone}" && exec "{sys.executable}" -m ascendbench device=cpu'
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 2, done.stderr[-2000:]
    assert "working directory was deleted" in done.stderr and "Traceback" not in done.stderr


# A worker of a joblib launcher killed with SIGKILL gets one SIGTERM (PR_SET_PDEATHSIG) per thread
# of the launcher that dies: the second arrives while the first one's `interrupted` record is
# written.
SECOND_SIGNAL = """
import os, signal, sys, time
from pathlib import Path
from ascendbench import cli
from ascendbench.job.record import RecordWriter
signal.signal(signal.SIGTERM, cli._terminated)
writer = RecordWriter(Path(sys.argv[1]), {})
try:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)
except KeyboardInterrupt as exc:
    os.kill(os.getpid(), signal.SIGTERM)  # the next launcher thread dies meanwhile
    writer.finish("interrupted", exc)
"""


def test_a_second_termination_signal_cannot_cut_the_interrupted_record_short(tmp_path):
    done = subprocess.run([sys.executable, "-c", SECOND_SIGNAL, str(tmp_path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert read_record(tmp_path)["status"] == "interrupted"


@pytest.mark.slow
def test_the_job_modules_are_imported_with_the_collector_paused_then_frozen():
    """The first job imports torch and the stages without a collector pass over the half million
    objects they make (several 0.1-0.3 s passes), then freezes them: later full passes skip them.
    The collector's own state is put back; a second job imports nothing and freezes nothing."""
    code = ("import gc, sys\nfrom ascendbench import cli\n"
            "with cli._frozen_imports():\n"
            "    paused = not gc.isenabled()\n"
            "    import ascendbench.job.runner\n"
            "frozen = gc.get_freeze_count()\n"
            "with cli._frozen_imports():\n"
            "    pass\n"
            "print(paused, gc.isenabled(), frozen > 100_000, gc.get_freeze_count() == frozen)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True", "True"]
