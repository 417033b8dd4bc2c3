"""A saved run (``baseline.source``) is data written by someone else: the paths its record names
stay inside its directory, its outputs file must match the statistics its record kept, a run that
failed its own check or a CPU run in bfloat16 is no reference, and a record that lost its workload
fields is refused, not waved on.

The saved runs are real tiny_flux2_decoder CPU jobs (float32, and bfloat16), copied and then edited
as an attacker or a careless copy would."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from ascendbench.baseline.source import reference_from_source, resolve_source
from ascendbench.errors import ReferenceMismatchError, ReferenceSourceError

from helpers import TINY_RUN, read_record, run_app

JOB = ["model=tiny_flux2_decoder", *TINY_RUN, "bench.flops.enabled=false",
       "baseline.process=in-process"]


def _run(cwd: Path, *overrides: str):
    cwd.mkdir(parents=True, exist_ok=True)
    return run_app([*JOB, f"baseline.cache_dir={cwd / 'cache'}", *overrides], cwd=cwd)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, Path]:
    """Two finished CPU jobs: float32 (a fit reference) and bfloat16 (its own verdict FAIL or
    PASS)."""
    root = tmp_path_factory.mktemp("saved")
    found = {}
    for dtype in ("float32", "bfloat16"):
        result = _run(root / dtype, f"dtype={dtype}", "fail_on=null")
        assert result.returncode == 0, result.output[-3000:]
        found[dtype] = result.job_dir
    return found


def _copy(src: Path, dst: Path, edit=None) -> Path:
    shutil.copytree(src, dst)
    if edit is not None:
        record = json.loads((dst / "record.json").read_text())
        edit(record)
        (dst / "record.json").write_text(json.dumps(record))
    return dst


def _mine(job_dir: Path) -> dict:
    from ascendbench.baseline.source import record_workload

    return record_workload(read_record(job_dir))


@pytest.mark.parametrize("where", ["absolute", "dotdot", "symlink"])
def test_a_device_outputs_path_leaving_the_saved_job_dir_is_refused(saved, tmp_path, where):
    victim = saved["bfloat16"] / "tensors" / "device.safetensors"  # another job's outputs
    dotdot = f"../../{victim.parent.parent.parent.name}/job/tensors/device.safetensors"
    names = {"absolute": str(victim), "dotdot": dotdot, "symlink": "tensors/linked.safetensors"}

    def edit(record):
        record["artifacts"]["device_outputs"] = names[where]

    copy = _copy(saved["float32"], tmp_path / "copy", edit)
    if where == "dotdot":
        (tmp_path / victim.parent.parent.parent.name / "job" / "tensors").mkdir(parents=True)
        shutil.copy(victim, tmp_path / victim.parent.parent.parent.name / "job" / "tensors")
    if where == "symlink":
        (copy / "tensors" / "linked.safetensors").symlink_to(victim)
    with pytest.raises(ReferenceSourceError, match="outside the saved job's directory"):
        resolve_source(str(copy))


def test_a_bfloat16_job_against_another_jobs_outputs_fails_with_a_record(saved, tmp_path):
    copy = _copy(saved["float32"], tmp_path / "copy", lambda r: r["artifacts"].update(
        device_outputs=str(saved["bfloat16"] / "tensors" / "device.safetensors")))
    result = _run(tmp_path / "job", "dtype=bfloat16", f"baseline.source={copy}")
    record = read_record(result.job_dir)
    assert result.returncode == 1 and record["status"] == "failed" and record["verdict"] is None
    assert "outside the saved job's directory" in record["error"]["message"]


def test_the_reference_outputs_path_of_a_saved_run_is_confined_too(saved, tmp_path):
    def edit(record):
        record["job"]["device"] = "npu"
        record["artifacts"]["reference_outputs"] = "/etc/passwd"

    copy = _copy(saved["float32"], tmp_path / "copy", edit)
    with pytest.raises(ReferenceSourceError, match="artifacts.reference_outputs '/etc/passwd'"):
        resolve_source(str(copy)).cpu_reference()


def test_a_saved_cpu_bfloat16_run_is_not_a_cpu_reference(saved, tmp_path):
    assert read_record(saved["bfloat16"])["verdict"] == "FAIL"
    with pytest.raises(ReferenceSourceError, match="own verdict is FAIL"):
        reference_from_source(str(saved["bfloat16"]), _mine(saved["bfloat16"]), [])
    passed = _copy(saved["bfloat16"], tmp_path / "copy", lambda r: r.update(verdict="PASS"))
    with pytest.raises(ReferenceSourceError, match="CPU run in bfloat16, a low-precision output"):
        reference_from_source(str(passed), _mine(passed), [])


def test_a_saved_run_whose_own_verdict_is_fail_is_refused(saved, tmp_path):
    copy = _copy(saved["float32"], tmp_path / "copy", lambda r: r.update(verdict="FAIL"))
    with pytest.raises(ReferenceSourceError, match="own verdict is FAIL"):
        reference_from_source(str(copy), _mine(copy), [])


def test_a_saved_run_of_a_newer_record_schema_is_refused(saved, tmp_path):
    """Before: used without a word (its fields may mean something else in that version)."""
    copy = _copy(saved["float32"], tmp_path / "copy", lambda r: r.update(schema=99))
    with pytest.raises(ReferenceSourceError, match="is a record of schema 99, written by a newer"):
        reference_from_source(str(copy), _mine(copy), [])


def test_outputs_replaced_by_another_tensor_of_the_same_shape_and_dtype_are_refused(saved,
                                                                                   tmp_path):
    copy = _copy(saved["float32"], tmp_path / "copy")
    path = copy / "tensors" / "device.safetensors"
    outputs = load_file(str(path))
    flipped = {name: torch.flip(t, dims=[-1]).contiguous() for name, t in outputs.items()}
    save_file(flipped, str(path))
    with pytest.raises(ReferenceSourceError, match="with (first|last) .* but its record kept"):
        reference_from_source(str(copy), _mine(copy), [])
    save_file(outputs, str(path))  # the original file back: accepted
    assert set(reference_from_source(str(copy), _mine(copy), [])) == set(outputs)


@pytest.mark.parametrize("lost", ["seed", "inputs", "weights"])
def test_a_record_that_lost_workload_fields_is_refused_not_skipped(saved, tmp_path, lost):
    def edit(record):
        (record["job"] if lost == "seed" else record).pop(lost)

    copy = _copy(saved["float32"], tmp_path / "copy", edit)
    with pytest.raises(ReferenceMismatchError, match="lacks the workload field"):
        reference_from_source(str(copy), _mine(saved["float32"]), [])
    field = {"seed": "seed", "inputs": "inputs_sha256", "weights": "weights_digest"}[lost]
    accepted = reference_from_source(str(copy), _mine(saved["float32"]), [field])
    assert field in accepted.info["source"]["not_checked"], "an accepted gap is recorded"


def test_a_record_whose_output_statistics_were_removed_is_refused(saved, tmp_path):
    copy = _copy(saved["float32"], tmp_path / "copy", lambda r: r.pop("outputs"))
    with pytest.raises(ReferenceSourceError, match="keeps no statistics"):
        reference_from_source(str(copy), _mine(copy), [])


def test_a_cpu_float32_record_over_bfloat16_outputs_is_refused(saved, tmp_path):
    def edit(record):
        record.update(verdict="PASS")
        record["job"]["dtype"] = "float32"  # the bf16 run relabelled: its outputs say bfloat16

    copy = _copy(saved["bfloat16"], tmp_path / "copy", edit)
    with pytest.raises(ReferenceSourceError, match="contradicts itself"):
        reference_from_source(str(copy), _mine(copy), [])


def test_a_record_naming_other_inputs_than_its_inputs_file_is_refused(saved, tmp_path):
    """A run of another seed whose record was edited to this job's seed and inputs block: its
    record passes the workload check, its inputs file does not."""
    copy = _copy(saved["float32"], tmp_path / "copy")
    path = copy / "tensors" / "inputs.safetensors"
    inputs = load_file(str(path))
    save_file({k: (t + 1).contiguous() for k, t in inputs.items()}, str(path))
    with pytest.raises(ReferenceSourceError, match=r"inputs file .* does not hold the inputs its "
                                                   r"record names \(latent"):
        reference_from_source(str(copy), _mine(saved["float32"]), [])
    path.unlink()
    with pytest.raises(ReferenceSourceError, match="differ or are missing"):
        reference_from_source(str(copy), _mine(saved["float32"]), [])
    save_file(inputs, str(path))  # the original file back: accepted
    assert reference_from_source(str(copy), _mine(saved["float32"]), [])


@pytest.mark.parametrize("name", ["device.safetensors", "inputs.safetensors"])
def test_a_lying_safetensors_header_keeps_safetensors_own_message(saved, tmp_path, name):
    """Header length past the file's end. Before: the inputs file's raw SafetensorError, naming no
    file and no setting."""
    copy = _copy(saved["float32"], tmp_path / "copy")
    path = copy / "tensors" / name
    path.write_bytes((10 ** 9).to_bytes(8, "little") + path.read_bytes()[8:])
    with pytest.raises(ReferenceSourceError, match=rf"baseline.source=.*{path}.*header too large"):
        reference_from_source(str(copy), _mine(copy), [])
