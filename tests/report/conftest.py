"""Report fixtures: records written by the real RecordWriter, shaped like the runner's, with chosen numbers.

The report only reads records, so these tests write records with known values (the contract of
DESIGN.md: job, weights, baseline, metrics, bench, env) and check that every number in the report is
one of them. End-to-end runs producing real records are in tests/test_sweep.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ascendbench.job.record import RecordWriter


def _env(host: str, device: str, device_name: str) -> dict[str, Any]:
    return {"ascendbench": "0.1.0", "python": "3.11.7", "platform": f"Linux-{host}", "hostname": host,
            "torch_cuda": "12.1" if device == "cuda" else None, "torch_cann": "8.0" if device == "npu" else None,
            "libraries": {"torch": "2.5.1", "torch_npu": "2.5.1" if device == "npu" else None, "diffusers": "0.36.0"},
            "device": {"type": device, "index": 0, "name": device_name}}


def _metrics(mean_rel_err: float, rule_max: float, rmse: float) -> dict[str, Any]:
    verdict = "PASS" if mean_rel_err <= rule_max else "FAIL"
    return {
        "mean_rel_err": {"value": mean_rel_err, "verdict": verdict, "threshold": rule_max, "rule": f"<= {rule_max:g}",
                         "source": "FLUX.2 seed"},
        "rmse": {"value": rmse, "verdict": None, "threshold": None},
        "max_rel_err": {"value": 10 * mean_rel_err, "verdict": None, "threshold": None},
        "image_lpips": {"skipped": "LPIPS backbone weights not available offline"},
    }


@pytest.fixture
def write_record(tmp_path):
    """``write_record(name, **fields)`` writes ``<tmp>/records/<name>/record.json`` and returns its path.

    Fields: model, device, dtype, preset, height, width, batch, median_ms, mean_rel_err, rmse, status,
    weights ("random" or "loaded"), baseline ("ok" or "skipped"), host, device_name, inputs, error.
    """

    def _write(name: str, *, model="flux2_small_decoder", device="npu", dtype="float16", preset="mini",
               height=512, width=512, batch=1, median_ms=20.0, mean_rel_err=0.0078, rmse=2e-4, status="ok",
               weights="loaded", baseline="ok", host="host-a", device_name=None, inputs="sha256:aa",
               error=None, root: Path | None = None, rule_max=0.01) -> Path:
        job_dir = (root or tmp_path / "records") / name
        writer = RecordWriter(job_dir, {"seed": 42, "model": {"name": model}, "resume": {"force": False}})
        names = {"npu": "Ascend910B4", "cuda": "NVIDIA A100", "cpu": "AMD EPYC"}
        writer.update(env=_env(host, device, device_name or names.get(device, device)))
        writer.update(job={"model": model, "task": "ascendbench.tasks.VaeDecodeTask", "device": device,
                           "device_requested": device, "dtype": dtype, "dtype_requested": dtype, "preset": preset,
                           "seed": 42, "batch_size": batch, "height": height, "width": width,
                           "reference_dtype": "float64" if dtype == "float32" else "float32"})
        if status == "running":
            return writer.path
        if weights == "random":
            writer.update(weights={"kind": "random-init", "source": None, "digest": None, "init_seed": 42})
        else:
            writer.update(weights={"kind": "loaded", "source": "/models/flux2", "digest": "sha256:" + "ab" * 32})
        writer.update(inputs={"latent": {"shape": [batch, 32, height // 8, width // 8], "dtype": "float32",
                                         "sha256": inputs}})
        if status == "failed":
            writer.finish("failed", error or RuntimeError("device run failed: aclnn error 561000"), reason="unexpected")
            return writer.path
        if baseline == "skipped":
            writer.update(baseline={"skipped": "baseline.enabled=false (performance-only run)"},
                          metrics={"regression": {"skipped": "no CPU reference (baseline.enabled=false)"}})
        else:
            metrics = _metrics(mean_rel_err, rule_max, rmse)
            writer.update(baseline={"device": "cpu", "precision": "float32", "cache_hit": False}, metrics=metrics,
                          verdict=metrics["mean_rel_err"]["verdict"])
        writer.update(bench={"cold_ms": 10 * median_ms,
                             "latency": {"count": 20, "mean_ms": median_ms * 1.01, "median_ms": median_ms,
                                         "min_ms": median_ms * 0.99, "max_ms": median_ms * 1.05, "std_ms": 0.1,
                                         "p90_ms": median_ms * 1.02, "p95_ms": median_ms * 1.03},
                             "throughput": {"value": 1000.0 * batch / median_ms, "unit": "images/s"},
                             "memory": {"peak_allocated_mb": 133.4, "peak_reserved_mb": 140.0, "scope": f"{device}:0"},
                             "flops": {"per_call_tflop": 0.5, "achieved_tflops": 0.5 / median_ms * 1000, "mfu": 0.12}},
                      artifacts={"image_device_png": ["images/image_device_0.png"],
                                 "heatmap_png": "images/heatmap.png"})
        writer.finish("ok")
        return writer.path

    return _write
