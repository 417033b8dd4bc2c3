"""Tracking fixtures: an offline MLflow environment, a SQLite store in ``tmp_path``, records with
known numbers.

Every test reads runs back through MLflow's own client. Nothing reaches a network: no tracking
server, no telemetry, synchronous logging.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendbench.job.record import RecordWriter

LONG_TEXT = "x" * 7000  # longer than MLflow 3's 6000-character param limit


@pytest.fixture(autouse=True)
def _offline_mlflow(monkeypatch):
    """No telemetry, no async logging, no tracking URI from the host's environment."""
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("DO_NOT_TRACK", "true")
    monkeypatch.setenv("MLFLOW_ENABLE_ASYNC_LOGGING", "false")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


@pytest.fixture
def store(tmp_path) -> str:
    """A SQLite tracking URI in ``tmp_path`` (created at the first use)."""
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


@pytest.fixture
def write_job(tmp_path):
    """``write_job(name, dtype=..., median_ms=..., verdict=..., status=...)``: a job dir under
    ``<tmp>/sweep`` with a record written by the real RecordWriter, a PNG in ``images/`` and a
    ``compare.csv``."""

    def _write(name: str, *, dtype="float16", median_ms=20.0, verdict="PASS", status="ok",
               psnr=40.0) -> Path:
        job_dir = tmp_path / "sweep" / name
        config = {"seed": 42, "model": {"name": "tiny_flux2_decoder", "note": LONG_TEXT},
                  "dtype": {"name": dtype},
                  "preset": {"name": "mini", "height": 32, "width": 32}, "dry_run": False}
        writer = RecordWriter(job_dir, config)
        writer.update(job={"model": "tiny_flux2_decoder", "device": "cpu", "dtype": dtype,
                           "preset": "mini"},
                      env={"ascendbench": "0.1.0", "hostname": "host-a",
                           "device": {"type": "cpu", "name": "EPYC"}},
                      weights={"kind": "random-init", "init_seed": 42, "num_params": 43711})
        writer.update(metrics={"mean_rel_err": {"value": 0.004, "verdict": verdict,
                                                "threshold": 0.01},
                               "psnr_db": {"value": psnr, "verdict": None, "threshold": None},
                               "layer/blocks.0#1/0/cosine": {"value": 0.999, "verdict": "PASS",
                                                             "threshold": 0.99}},
                      verdict=verdict,
                      bench={"latency": {"count": 5, "median_ms": median_ms,
                                         "p90_ms": median_ms * 1.1,
                                         "median_ci95_low_ms": median_ms * 0.98,
                                         "median_ci95_high_ms": median_ms * 1.02},
                             "memory": {"peak_allocated_mb": 12.5}},
                      artifacts={"image_device_png": ["images/image_device_0.png"]})
        (job_dir / "images").mkdir(exist_ok=True)
        (job_dir / "images" / "image_device_0.png").write_bytes(b"\x89PNG\r\n\x1a\n")
        (job_dir / "compare.csv").write_text("layer,max_abs_err\nblocks.0,1e-6\n")
        writer.finish(status, RuntimeError("device run failed") if status == "failed" else None)
        return job_dir

    return _write
