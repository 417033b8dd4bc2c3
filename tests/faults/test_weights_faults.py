"""Weight faults: path missing, corrupted safetensors, checkpoint of another architecture,
pickle."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import torch
from diffusers import AutoencoderKLFlux2
from safetensors.torch import save_file

from ascendbench.errors import WeightsLoadError
from ascendbench.models.sources import files_digest, resolve_source

from helpers import TINY_FLUX2_ARCH, build_tiny_flux2

TINY = "model=tiny_flux2_decoder"


def _failed(record: dict, reason: str, error_type: str) -> str:
    assert record["status"] == "failed", record["status"]
    assert record["error"]["reason"] == reason and record["error"]["type"] == error_type, record[
        "error"
    ]
    return record["error"]["message"]


def test_weights_path_missing(app, fast, record_of, tmp_path):
    missing = tmp_path / "no" / "such" / "dir"
    code, console, job = app(TINY, *fast, f"model.source={missing}", "model.weights=required")
    assert code == 1
    message = _failed(record_of(job), "weights_not_found", "WeightsNotFoundError")
    assert str(missing) in message and "HF_ENDPOINT" in message and "model.source=" in message
    assert message in console and "Traceback" not in console


def test_truncated_safetensors_in_a_directory(app, fast, record_of, tiny_flux2_dir, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_flux2_dir, broken)
    weights = broken / "diffusion_pytorch_model.safetensors"
    weights.write_bytes(
        weights.read_bytes()[: weights.stat().st_size // 2]
    )  # an interrupted download
    code, console, job = app(TINY, *fast, f"model.source={broken}", "model.weights=auto")
    assert code == 1, "corrupted weights must fail, not fall back to random-init"
    message = _failed(record_of(job), "weights_invalid", "WeightsLoadError")
    assert str(broken) in message and "re-download" in message
    assert "Traceback" not in console


def test_garbage_single_safetensors_file(app, fast, record_of, tmp_path):
    path = tmp_path / "vae.safetensors"
    path.write_bytes(b"\xff" * 64)
    code, _, job = app(TINY, *fast, f"model.source={path}", "model.weights=required")
    assert code == 1
    assert str(path) in _failed(record_of(job), "weights_invalid", "WeightsLoadError")


def test_checkpoint_of_another_architecture_lists_keys(app, fast, record_of, tmp_path):
    torch.manual_seed(0)
    other = AutoencoderKLFlux2(
        **{
            **TINY_FLUX2_ARCH,
            "block_out_channels": [8, 32],
            "layers_per_block": 2,
            "down_block_types": ["DownEncoderBlock2D"] * 2,
            "up_block_types": ["UpDecoderBlock2D"],
            "decoder_block_out_channels": [16],
        }
    )
    path = tmp_path / "other.safetensors"
    save_file(other.state_dict(), str(path))
    code, console, job = app(TINY, *fast, f"model.source={path}", "model.weights=required")
    assert code == 1
    message = _failed(record_of(job), "weights_invalid", "WeightsLoadError")
    mine, theirs = set(build_tiny_flux2().state_dict()), set(other.state_dict())
    missing, unexpected = sorted(mine - theirs), sorted(theirs - mine)
    assert missing and unexpected
    assert f"{len(missing)} missing keys (first: {missing[:5]})" in message
    assert f"{len(unexpected)} unexpected keys (first: {unexpected[:5]})" in message
    assert "does not fit diffusers.AutoencoderKLFlux2" in message and str(path) in message
    assert "Traceback" not in console


def test_pickle_checkpoint_refused_then_allowed(app, fast, record_of, tmp_path):
    path = tmp_path / "vae.ckpt"
    torch.save(build_tiny_flux2().state_dict(), path)
    code, console, job = app(TINY, *fast, f"model.source={path}", "model.weights=auto")
    assert code == 1, "a pickle checkpoint is refused even when weights=auto could fall back"
    message = _failed(record_of(job), "pickle_refused", "UnsafeWeightsError")
    assert (
        str(path) in message and "model.allow_pickle=true" in message and "safetensors" in message
    )
    assert record_of(job)["weights"] is None

    code, console, job = app(
        TINY,
        *fast,
        f"model.source={path}",
        "model.weights=required",
        "model.allow_pickle=true",
        out_dir=tmp_path / "allowed",
    )
    record = record_of(job)
    assert code == 0, console
    assert record["status"] == "ok" and record["weights"]["kind"] == "loaded"
    assert record["weights"]["format"] == "pickle" and "allow_pickle" in record["weights"]["origin"]


def test_a_fifo_weights_file_is_refused_not_waited_on_in_a_dry_run(
    popen, fast, tiny_flux2_dir, tmp_path
):
    model = tmp_path / "model"
    shutil.copytree(tiny_flux2_dir, model)
    fifo = model / "diffusion_pytorch_model.safetensors"
    fifo.unlink()
    os.mkfifo(fifo)
    job = tmp_path / "job"
    proc = popen(
        TINY,
        *fast,
        f"model.source={model}",
        "model.weights=required",
        "dry_run=true",
        f"hydra.run.dir={job}",
    )
    try:
        output, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the dry run waits on the FIFO") from None
    assert proc.returncode == 1, output[-2000:]
    assert "not a regular file" in output and str(fifo) in output and "Traceback" not in output


def test_a_fifo_named_as_the_source_or_digested_is_refused_at_once(tmp_path):
    fifo = tmp_path / "weights.safetensors"
    os.mkfifo(fifo)
    with pytest.raises(WeightsLoadError, match="not a regular file or a directory"):
        resolve_source(str(fifo))
    with pytest.raises(OSError, match="not a regular file"):
        files_digest((fifo,))
