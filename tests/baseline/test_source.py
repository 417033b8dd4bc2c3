"""``baseline.source``: a saved run (another machine's job dir, its record, or a tensors file) is
the reference instead of a CPU computation, checked to be the same workload first.

The "other machine" is a tiny_flux2_decoder job run once per module with device=cpu dtype=float32.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from ascendbench.baseline.source import (
    BARE_LIMITATION,
    compare_workloads,
    record_workload,
    resolve_source,
    weights_identity,
)
from ascendbench.config.schemas import SourceField
from ascendbench.errors import ReferenceSourceError
from ascendbench.report.crossdevice import crossdevice_section
from ascendbench.report.fmt import num
from ascendbench.report.gather import load_row
from ascendbench.report.tables import reference_cell

from helpers import TINY_RUN, read_record, run_app

JOB = ["model=tiny_flux2_decoder", *TINY_RUN, "dtype=float32", "bench.flops.enabled=false",
       "baseline.process=in-process"]


@pytest.fixture(scope="module")
def source_dir(tmp_path_factory) -> Path:
    """The earlier job (the stand-in for another machine): a finished CPU float32 run with its
    tensors."""
    cwd = tmp_path_factory.mktemp("other_machine")
    result = run_app([*JOB, f"baseline.cache_dir={cwd / 'cache'}"], cwd=cwd)
    assert result.returncode == 0, result.output[-3000:]
    return result.job_dir


@pytest.fixture
def no_cpu_reference(monkeypatch):
    """A CPU reference computed (or read from the cache) by the job fails the test."""

    def refuse(query):
        raise AssertionError("a CPU reference was requested although baseline.source is set")

    monkeypatch.setattr("ascendbench.job.stages.reference.get_or_compute", refuse)


def _job(tmp_path, *overrides):
    tmp_path.mkdir(parents=True, exist_ok=True)
    cache = tmp_path / "cache"
    result = run_app([*JOB, f"baseline.cache_dir={cache}", *overrides], cwd=tmp_path)
    return result, read_record(result.job_dir), cache


def test_a_saved_job_dir_is_the_reference_and_no_cpu_reference_is_computed(source_dir, tmp_path,
                                                                           no_cpu_reference):
    result, record, cache = _job(tmp_path, f"baseline.source={source_dir}")
    assert result.returncode == 0, result.output[-3000:]
    source = record["baseline"]["source"]
    assert source["record"] == str(source_dir / "record.json")
    assert source["tensors"] == str(source_dir / "tensors" / "device.safetensors")
    found = (source["device"], source["dtype"], source["reference_dtype"])
    assert found == ("cpu", "float32", "float64")
    assert source["host"] == read_record(source_dir)["env"]["hostname"]
    assert source["checked"] == [f.value for f in SourceField] and source["allowed"] == {}
    assert record["baseline"]["computed"] is False and "cache_key" not in record["baseline"]
    assert record["job"]["reference_dtype"] == "float32"
    assert not cache.exists(), "the baseline cache is not touched"
    assert record["metrics"]["max_abs_err"]["value"] == 0.0, "the same CPU float32 run"
    saved = load_file(str(result.job_dir / "tensors" / "reference.safetensors"))
    assert torch.equal(saved["image"], load_file(source["tensors"])["image"])
    host = source["host"]
    assert f"reference saved run: cpu float32 on {host} ({source['record']})" in result.output
    cell = reference_cell(load_row(result.job_dir / "record.json"))
    assert cell == f"saved cpu float32 run ({host})"


def test_a_record_json_serves_like_its_job_dir(source_dir, tmp_path, no_cpu_reference):
    result, record, _ = _job(tmp_path, f"baseline.source={source_dir / 'record.json'}")
    assert result.returncode == 0, result.output[-3000:]
    assert record["baseline"]["source"]["kind"] == "job"


@pytest.mark.parametrize(("override", "named"), [
    ("seed=7", ["seed differs (source 42, this job 7)", "inputs_sha256 differs"]),
    ("preset.height=64", ["sizes differs", '"height": 64', "inputs_sha256 differs"]),
])
def test_another_workload_is_refused_naming_each_field(source_dir, tmp_path, override, named):
    result, record, _ = _job(tmp_path, f"baseline.source={source_dir}", override)
    assert result.returncode == 1
    assert record["status"] == "failed" and record["error"]["reason"] == "reference_mismatch"
    message = record["error"]["message"]
    for text in named:
        assert text in message
    assert "baseline.source_allow=[" in message
    assert named[0] in result.output, "the paragraph is printed"


def test_other_weights_are_refused_unless_allowed_and_then_recorded(source_dir, tmp_path):
    refused, record, _ = _job(tmp_path / "refused", f"baseline.source={source_dir}",
                              "model.init_seed=7")
    assert record["error"]["reason"] == "reference_mismatch"
    assert "weights_digest differs (source random-init seed 42, this job random-init seed 7)" in \
        record["error"]["message"]
    assert "inputs_sha256 differs" not in record["error"]["message"], "the inputs are the same"
    allowed, record, _ = _job(tmp_path / "allowed", f"baseline.source={source_dir}",
                              "model.init_seed=7", "baseline.source_allow=[weights_digest]",
                              "fail_on=null")
    assert allowed.returncode == 0, allowed.output[-3000:]
    assert record["status"] == "ok"
    assert record["baseline"]["source"]["allowed"] == {
        "weights_digest": {"source": "random-init seed 42", "job": "random-init seed 7"}}
    assert record["verdict"] == "FAIL", "other weights, other outputs: still judged"


def test_an_unknown_allow_key_fails_at_compose_time(source_dir, tmp_path):
    result = run_app([*JOB, f"baseline.source={source_dir}", "baseline.source_allow=[dtype]"],
                     cwd=tmp_path)
    assert result.returncode != 0
    allowed = "expected one of [model, task, sizes, seed, inputs_sha256, weights_digest]"
    assert allowed in result.output


def test_a_bare_tensors_file_serves_with_its_limitation_stated(source_dir, tmp_path,
                                                               no_cpu_reference):
    bare = source_dir / "tensors" / "device.safetensors"
    result, record, _ = _job(tmp_path, f"baseline.source={bare}")
    assert result.returncode == 0, result.output[-3000:]
    source = record["baseline"]["source"]
    assert source["kind"] == "tensors" and source["limitation"] == BARE_LIMITATION
    assert "record" not in source and source["checked"] == []
    assert len(source["not_checked"]) == len(SourceField)
    assert "names and shapes checked only" in result.output


def test_a_bare_file_of_other_shapes_is_refused_naming_the_output(tmp_path):
    wrong = tmp_path / "wrong.safetensors"
    save_file({"image": torch.zeros(1, 3, 8, 8)}, str(wrong))
    result, record, _ = _job(tmp_path, f"baseline.source={wrong}")
    assert result.returncode == 1
    assert record["error"]["reason"] == "reference_mismatch"
    assert "image: source [1, 3, 8, 8], this job [1, 3, 32, 32]" in record["error"]["message"]


def test_a_missing_source_is_a_clear_error(tmp_path):
    missing = tmp_path / "copied_from_h100"
    result, record, _ = _job(tmp_path, f"baseline.source={missing}")
    assert result.returncode == 1
    assert record["error"]["reason"] == "reference_source"
    assert f"{missing} does not exist" in record["error"]["message"]
    accepted = "a job directory (with record.json), its record.json, or a tensors file"
    assert accepted in record["error"]["message"]


def test_the_dry_run_says_where_the_reference_comes_from(source_dir, tmp_path):
    result, record, _ = _job(tmp_path, f"baseline.source={source_dir}", "dry_run=true")
    assert result.returncode == 0, result.output[-3000:]
    assert f"baseline  saved run of cpu float32 on {record['env']['hostname']}" in result.output
    assert "no CPU reference computed" in result.output
    assert record["plan"]["baseline"]["source"]["record"] == str(source_dir / "record.json")
    refused, _, _ = _job(tmp_path / "refused", f"baseline.source={source_dir}", "seed=7",
                         "dry_run=true")
    assert refused.returncode == 1 and "seed differs (source 42, this job 7)" in refused.output


def test_unreadable_sources_name_the_path(tmp_path, source_dir):
    empty = tmp_path / "empty_dir"
    empty.mkdir()
    with pytest.raises(ReferenceSourceError, match="holds no record.json"):
        resolve_source(str(empty))
    broken = tmp_path / "record.json"
    broken.write_text("{not json")
    with pytest.raises(ReferenceSourceError, match="cannot be read as a record"):
        resolve_source(str(broken))
    failed = tmp_path / "failed"
    shutil.copytree(source_dir, failed)
    record = json.loads((failed / "record.json").read_text())
    (failed / "record.json").write_text(json.dumps({**record, "status": "failed"}))
    with pytest.raises(ReferenceSourceError, match="status 'failed'"):
        resolve_source(str(failed))
    (failed / "record.json").write_text(json.dumps(record))
    (failed / "tensors" / "device.safetensors").unlink()
    with pytest.raises(ReferenceSourceError, match="device outputs .* are not there"):
        resolve_source(str(failed))


def test_workload_fields_and_their_comparison(source_dir):
    theirs = record_workload(read_record(source_dir))
    assert theirs["weights_digest"] == weights_identity({"kind": "random-init", "init_seed": 42})
    assert weights_identity({"kind": "loaded", "digest": "sha256:ab"}) == "sha256:ab"
    mine = {**theirs, "sizes": {"height": 32, "width": 32}, "weights_digest": None}
    found = compare_workloads(theirs, mine)
    assert found == ({}, ["weights_digest"]), "common sizes agree; unknown is not equal"


def test_the_cross_device_section_divides_by_the_saved_runs_error(source_dir, tmp_path,
                                                                  no_cpu_reference):
    """msprobe's benchmark method with a saved accelerator run (a copy of the CPU job relabelled
    cuda): both errors against that run's own CPU reference, their ratio judged by the limits."""
    gpu = tmp_path / "gpu_machine"
    shutil.copytree(source_dir, gpu)
    record = read_record(gpu)
    record["job"]["device"] = "cuda"
    (gpu / "record.json").write_text(json.dumps(record))
    result, mine, _ = _job(tmp_path, f"baseline.source={gpu}", "dtype=bfloat16", "fail_on=null")
    assert result.returncode == 0, result.output[-3000:]
    bench = mine["baseline"]["benchmark"]
    assert bench["cpu_reference"] == str(gpu / "tensors" / "reference.safetensors")
    assert bench["reference_device"] == "cuda"
    assert bench["device"]["rmse"] > bench["reference"]["rmse"] > 0
    row = load_row(result.job_dir / "record.json")
    text = crossdevice_section([row], "cuda", {"rmse": 1e9}, tmp_path)
    line = next(line for line in text.splitlines() if "| rmse |" in line)
    ratio = num(bench["device"]["rmse"] / bench["reference"]["rmse"], 3)
    cells = f"| {num(bench['device']['rmse'])} | {num(bench['reference']['rmse'])} | {ratio} |"
    assert f"{cells} {num(1e9)} | PASS |" in line
    assert str(gpu / "record.json") in line
