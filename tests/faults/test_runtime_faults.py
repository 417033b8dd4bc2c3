"""Faults while a job runs: device unavailable, out of memory in a sweep, NaN/Inf in the device
output."""

from __future__ import annotations

import json

import pytest
import torch

TINY = "model=tiny_flux2_decoder"


def test_device_unavailable_names_the_missing_runtime(app, fast, record_of):
    pytest.importorskip("torch")  # always there; torch_npu is what must be missing on this host
    code, console, job = app(TINY, *[o for o in fast if not o.startswith("device=")], "device=npu")
    assert code == 1
    record = record_of(job)
    assert record["status"] == "failed" and record["error"]["reason"] == "device_unavailable"
    message = record["error"]["message"]
    assert (
        "device=npu is not available" in message
        and "torch_npu" in message
        and "device=cpu" in message
    )
    assert message in console and "Traceback" not in console


def test_oom_in_the_device_run_fails_that_job_and_the_sweep_goes_on(app, fast, record_of):
    from seams import OOM_MESSAGE

    code, console, sweep = app(
        TINY, *[o for o in fast if not o.startswith("device=")], "device=oom_cpu,cpu", multirun=True
    )
    assert code == 1, "a sweep with a failed job exits non-zero"
    dirs = sorted(p.parent for p in sweep.glob("*/record.json"))
    assert len(dirs) == 2, dirs
    oom, ok = (
        record_of(next(d for d in dirs if ("device=cpu" in d.name) == want))
        for want in (False, True)
    )
    assert oom["status"] == "failed" and oom["error"]["reason"] == "oom"
    assert oom["error"]["type"] == "DeviceOutOfMemoryError"
    message = oom["error"]["message"]
    assert (
        "out of memory on cpu during the device run" in message
        and "torch.OutOfMemoryError" in message
    )
    assert (
        OOM_MESSAGE.split(".")[0] in message
        and "preset.batch_size" in message
        and "dry_run=true" in message
    )
    assert oom["baseline"] is not None, "the stages before the device run kept their results"
    assert ok["status"] == "ok" and ok["verdict"] == "PASS"
    assert "Traceback" not in console and "reason oom" in console


def test_oom_is_the_real_torch_class():
    from seams import OomOnRunAdapter

    with pytest.raises(torch.OutOfMemoryError):
        OomOnRunAdapter("cpu").synchronize()


def test_nan_and_inf_in_the_device_output_fail_with_count_and_first_index(app, fast, record_of):
    from seams import NanOnDeviceDecode

    code, console, job = app("model=nan_tiny", *fast)
    record = record_of(job)
    assert record["status"] == "ok", "the job ran; its verdict is what fails"
    assert code == 1, (
        "the job finished (status ok); its FAIL verdict exits 1 (fail_on=FAIL by default)"
    )
    entry = record["metrics"]["nonfinite_mismatch"]
    assert entry["value"] == 2 and entry["verdict"] == "FAIL" and entry["threshold"] == 0
    assert entry["first_index"] == list(NanOnDeviceDecode.NAN_AT)
    assert record["verdict"] == "FAIL"
    assert "FAIL" in console
    json.dumps(record, allow_nan=False)  # no bare NaN/Infinity in the record
