"""Report fixtures: records written by the real RecordWriter, shaped like the runner's, with chosen
numbers.

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
    return {"ascendbench": "0.1.0", "python": "3.11.7", "platform": f"Linux-{host}",
            "hostname": host,
            "torch_cuda": "12.1" if device == "cuda" else None,
            "torch_cann": "8.0" if device == "npu" else None,
            "libraries": {"torch": "2.5.1", "torch_npu": "2.5.1" if device == "npu" else None,
                          "diffusers": "0.36.0"},
            "device": {"type": device, "index": 0, "name": device_name}}


def _metrics(mean_rel_err: float, rule_max: float, rmse: float) -> dict[str, Any]:
    verdict = "PASS" if mean_rel_err <= rule_max else "FAIL"
    return {
        "mean_rel_err": {"value": mean_rel_err, "verdict": verdict, "threshold": rule_max,
                         "rule": f"<= {rule_max:g}",
                         "source": "FLUX.2 seed"},
        "rmse": {"value": rmse, "verdict": None, "threshold": None},
        "max_rel_err": {"value": 10 * mean_rel_err, "verdict": None, "threshold": None},
        "image_lpips": {"skipped": "LPIPS backbone weights not available offline"},
        }


@pytest.fixture
def write_record(tmp_path):
    """``write_record(name, **fields)`` writes ``<tmp>/records/<name>/record.json`` and returns its
    path.

    Fields: model, device, dtype, preset, height, width, batch, median_ms, mean_rel_err, rmse,
    status, weights ("random" or "loaded"), baseline ("ok" or "skipped"), host, device_name, inputs,
    error, and ci: the 95% CI of the median as a fraction either side of it
    (``bench.latency.median_ci95_*_ms``; None: not recorded).
    """

    def _write(name: str, *, model="flux2_small_decoder", device="npu", dtype="float16",
               preset="mini",
               height=512, width=512, batch=1, median_ms=20.0, mean_rel_err=0.0078, rmse=2e-4,
               status="ok",
               weights="loaded", baseline="ok", host="host-a", device_name=None, inputs="sha256:aa",
               error=None, root: Path | None = None, rule_max=0.01, ci=None) -> Path:
        job_dir = (root or tmp_path / "records") / name
        writer = RecordWriter(job_dir,
                              {"seed": 42, "model": {"name": model}, "resume": {"force": False}})
        names = {"npu": "Ascend910B4", "cuda": "NVIDIA A100", "cpu": "AMD EPYC"}
        writer.update(env=_env(host, device, device_name or names.get(device, device)))
        writer.update(job={"model": model, "task": "ascendbench.tasks.VaeDecodeTask",
                           "device": device,
                           "device_requested": device, "dtype": dtype, "dtype_requested": dtype,
                           "preset": preset,
                           "seed": 42, "batch_size": batch, "height": height, "width": width,
                           "reference_dtype": "float64" if dtype == "float32" else "float32"})
        if status == "running":
            return writer.path
        if weights == "random":
            writer.update(weights={"kind": "random-init", "source": None, "digest": None,
                                   "init_seed": 42})
        else:
            writer.update(weights={"kind": "loaded", "source": "/models/flux2",
                                   "digest": "sha256:" + "ab" * 32})
        writer.update(inputs={"latent": {"shape": [batch, 32, height // 8, width // 8],
                                         "dtype": "float32",
                                         "sha256": inputs}})
        if status == "failed":
            writer.finish("failed", error or RuntimeError("device run failed: aclnn error 561000"),
                          reason="unexpected")
            return writer.path
        if baseline == "skipped":
            writer.update(baseline={"skipped": "baseline.enabled=false (performance-only run)"},
                          metrics={"regression": {"skipped": "no CPU reference "
                                                             "(baseline.enabled=false)"}})
        else:
            metrics = _metrics(mean_rel_err, rule_max, rmse)
            writer.update(baseline={"device": "cpu", "precision": "float32", "cache_hit": False},
                          metrics=metrics,
                          verdict=metrics["mean_rel_err"]["verdict"])
        writer.update(bench={"cold_ms": 10 * median_ms,
                             "latency": {"count": 20, "mean_ms": median_ms * 1.01,
                                         "median_ms": median_ms,
                                         "min_ms": median_ms * 0.99, "max_ms": median_ms * 1.05,
                                         "std_ms": 0.1,
                                         "p90_ms": median_ms * 1.02, "p95_ms": median_ms * 1.03,
                                         **({} if ci is None else {
                                             "median_ci95_low_ms": median_ms * (1 - ci),
                                             "median_ci95_high_ms": median_ms * (1 + ci)})},
                             "throughput": {"value": 1000.0 * batch / median_ms,
                                            "unit": "images/s"},
                             "memory": {"peak_allocated_mb": 133.4, "peak_reserved_mb": 140.0,
                                        "scope": f"{device}:0"},
                             "flops": {"per_call_tflop": 0.5,
                                       "achieved_tflops": 0.5 / median_ms * 1000, "mfu": 0.12}},
                      artifacts={"image_device_png": ["images/image_device_0.png"],
                                 "heatmap_png": "images/heatmap.png"})
        writer.finish("ok")
        return writer.path

    return _write


def _layer_metrics(blocks: int, calls: int, worst: dict[str, Any]) -> tuple[dict[str, Any],
                                                                            dict[str, Any]]:
    """``layer/<block>#<call>/0/<metric>`` entries (max_abs_err, cosine, nonfinite_mismatch) and
    compare.results.

    ``worst`` = {"layer": name, "max_abs_err": v, "cosine": v} plants the worst values at one entry;
    the others get 1e-6 / 0.999999999 / 0, all passing.
    """
    metrics, results = {}, {}
    for call in range(calls):
        for block in range(blocks):
            layer = f"transformer.transformer_blocks.{block}#{call}/0"
            err = worst["max_abs_err"] if layer == worst["layer"] else 1e-6
            cos = worst["cosine"] if layer == worst["layer"] else 0.999999999
            entries = {"max_abs_err": (err, "<= 0.001", err <= 1e-3),
                       "cosine": (cos, ">= 0.9999", cos >= 0.9999),
                       "nonfinite_mismatch": (0.0, "<= 0", True)}
            for metric, (value, rule, ok) in entries.items():
                metrics[f"layer/{layer}/{metric}"] = {"value": value,
                                                      "verdict": "PASS" if ok else "FAIL",
                                                      "threshold": float(rule.split()[-1]),
                                                      "rule": rule}
            failed = not all(ok for _, _, ok in entries.values())
            results[layer] = {"result": "FAIL" if failed else "PASS", "message": ""}
    return metrics, results


def _output_metrics(output: str, psnr: float) -> dict[str, Any]:
    values = {"mae": 2.8e-7, "mse": 1.2e-13, "rmse": 3.5e-7, "max_abs_err": 1.9e-6,
              "max_rel_err": 0.15,
              "one_thousandth_err_ratio": 0.999, "small_value_err_ratio": 1.0, "psnr_db": psnr,
              "allclose_mismatch_ratio": 0.0, "error_balance": 0.008, "ref_nonfinite": 0.0,
              "numel": 1769472.0}
    metrics = {f"{output}/{k}": {"value": v, "verdict": None, "threshold": None}
               for k, v in values.items()}
    metrics[f"{output}/mean_rel_err"] = {"value": 7e-6, "verdict": "PASS", "threshold": 0.01,
                                         "rule": "<= 0.01"}
    metrics[f"{output}/cosine"] = {"value": 0.99999, "verdict": "PASS", "threshold": 0.99,
                                   "rule": ">= 0.99"}
    metrics[f"{output}/nonfinite_mismatch"] = {"value": 0.0, "verdict": "PASS", "threshold": 0.0,
                                               "rule": "<= 0"}
    return metrics


@pytest.fixture
def write_t2v_record(tmp_path):
    """``write_t2v_record(name, preset=..., ...)``: a record shaped like a real tiny_ltx2_t2v job's.

    Its ``job`` section carries no frames or steps (as today's records): they are in
    ``config.preset``. Hidden states: ``blocks`` hooked blocks x ``calls`` calls, all passing unless
    ``worst`` plants a value.
    """

    def _write(name: str, *, preset="mini", height=256, width=256, frames=9, steps=50,
               dtype="float32",
               blocks=2, calls=50, worst=None, root: Path | None = None, psnr=135.1) -> Path:
        config = {"seed": 42, "dry_run": False, "model": {"name": "tiny_ltx2_t2v"},
                  "preset": {"name": preset, "height": height, "width": width, "num_frames": frames,
                             "batch_size": 1, "steps": steps}}
        writer = RecordWriter((root or tmp_path / "records") / name, config)
        writer.update(env=_env("vm", "cpu", "Intel Xeon"))
        writer.update(job={"model": "tiny_ltx2_t2v", "task": "ascendbench.tasks.TextToVideoTask",
                           "device": "cpu",
                           "dtype": dtype, "preset": preset, "seed": 42, "batch_size": 1,
                           "height": height,
                           "width": width, "reference_dtype": "float64"},
                      weights={"kind": "random-init", "init_seed": 42, "load_seconds": 0.18,
                               "load": {"seconds": 3.39}},
                      baseline={"device": "cpu", "precision": "float64", "cache_hit": False})
        layers, results = _layer_metrics(blocks, calls,
                                         worst or {"layer": None, "max_abs_err": 0, "cosine": 1})
        metrics = {**_output_metrics("audio", 168.7), **_output_metrics("video", psnr), **layers}
        metrics["video/video_psnr_db_mean"] = {"value": psnr,
                                               "verdict": "PASS" if psnr >= 30 else "FAIL",
                                               "threshold": 30.0, "rule": ">= 30", "frames": frames}
        metrics["video/video_ssim_mean"] = {"value": 0.999, "verdict": "PASS", "threshold": 0.95,
                                            "rule": ">= 0.95"}
        metrics["video/video_lpips_mean"] = {"skipped": "LPIPS backbone weights not available "
                                                        "offline"}
        verdict = "FAIL" if any(e.get("verdict") == "FAIL" for e in metrics.values()) else "PASS"
        writer.update(metrics=metrics, verdict=verdict,
                      compare={"mode": "patterns", "layers": len(results), "results": results},
                      bench={"cold_ms": 4965.0,
                             "latency": {"count": 10, "median_ms": 3165.0, "min_ms": 2806.5,
                                                            "max_ms": 44052.3, "mean_ms": 9126.1,
                                                            "std_ms": 12973.3,
                                                            "p90_ms": 17887.7, "p95_ms": 30970.0},
                             "throughput": {"value": 2.84, "unit": "frames/s"}})
        writer.finish("ok")
        return writer.path

    return _write


@pytest.fixture
def dtype_preset_records(write_record, tmp_path):
    """A 2 dtype x 2 preset sweep on npu and cpu (medians with a 95% CI), one failed job; the npu
    jobs' heatmap PNG exists on disk. Returns the records directory."""
    from PIL import Image

    for device, scale in (("npu", 1.0), ("cpu", 100.0)):
        for dtype, speed in (("float32", 1.0), ("float16", 0.55)):
            for preset, side in (("mini", 256), ("balanced", 512)):
                path = write_record(f"{device}_{dtype}_{preset}", device=device, dtype=dtype,
                                    preset=preset,
                                    height=side, width=side, median_ms=side / 10 * speed * scale,
                                    ci=0.03,
                                    mean_rel_err=0.0024 if dtype == "float32" else 0.0078)
                if device == "npu":
                    (path.parent / "images").mkdir()
                    Image.new("RGB", (48, 16),
                              (200, 40, 40)).save(path.parent / "images" / "heatmap.png")
    write_record("npu_failed", status="failed", height=1024, width=1024)
    return tmp_path / "records"
