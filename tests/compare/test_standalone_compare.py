"""``python -m ascendbench.compare REF CAND``: formats, exit codes, the job's own numbers."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import save_file

from ascendbench.compare.__main__ import main
from ascendbench.compare.files import UnusableInput, read_outputs
from ascendbench.compare.msprobe import COLUMNS as MSPROBE_COLUMNS

from helpers import TINY_RUN, build_tiny_flux2, read_record


@pytest.fixture(scope="module")
def decoded():
    """A tiny FLUX.2 decoder's output in float32 and in bfloat16 (an "fp32" and a "bf16 run")."""
    model = build_tiny_flux2()
    generator = torch.Generator().manual_seed(1)
    latent = torch.randn(1, model.config.latent_channels, 4, 4, generator=generator)
    with torch.no_grad():
        fp32 = model.decode(latent).sample
        bf16 = model.to(torch.bfloat16).decode(latent.bfloat16()).sample
    return fp32, bf16


def _run(tmp_path, *args):
    return main([*map(str, args), "--out", str(tmp_path / "out")])


def test_bf16_against_fp32_fails_the_seed_allclose_rule_and_identical_passes(tmp_path, decoded):
    fp32, bf16 = decoded
    save_file({"image": fp32.contiguous()}, tmp_path / "ref.safetensors")
    save_file({"image": bf16.contiguous()}, tmp_path / "cand.safetensors")
    assert _run(tmp_path, tmp_path / "ref.safetensors", tmp_path / "cand.safetensors",
                "--atol", 0.01, "--rtol", 0.001) == 1
    record = json.loads((tmp_path / "out" / "record.json").read_text())
    assert record["metrics"]["allclose_mismatch_ratio"]["verdict"] == "FAIL"
    assert record["dtype_rules"] == "bfloat16"
    with (tmp_path / "out" / "compare_msprobe.csv").open() as handle:
        row = next(csv.DictReader(handle))
    # msprobe's names for msprobe's numbers; ascendbench's verdict in columns of its own
    assert tuple(row) == MSPROBE_COLUMNS and row["Verdict (ascendbench)"] == "FAIL"
    assert "allclose_mismatch_ratio" in row["Failed rules (ascendbench)"]
    assert float(row["One Thousandth Err Ratio"]) < 1.0 and "Result" not in row
    assert _run(tmp_path, tmp_path / "ref.safetensors", tmp_path / "ref.safetensors",
                "--atol", 0.01, "--rtol", 0.001) == 0


def _write(kind, path, tensor):
    """``tensor`` ([1, 3, H, W] image or [1, 3, T, H, W] video in [-1, 1]) saved as ``kind``."""
    pixels = ((tensor.clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8)
    if kind == "npy":
        np.save(path, tensor.numpy())
    elif kind == "pt":
        torch.save({"out": tensor}, path)
    elif kind == "png":
        Image.fromarray(pixels[0].permute(1, 2, 0).numpy()).save(path)
    elif kind == "frames":
        path.mkdir()
        for t in range(tensor.shape[2]):
            Image.fromarray(pixels[0, :, t].permute(1, 2, 0).numpy()).save(path / f"{t:03d}.png")
    elif kind == "mp4":
        import imageio.v3 as iio

        iio.imwrite(path, pixels[0].permute(1, 2, 3, 0).numpy(), fps=8, codec="libx264", quality=10)


@pytest.mark.parametrize("kind, suffix, video", [
    ("npy", ".npy", False), ("pt", ".pt", False), ("png", ".png", False), ("frames", "", True),
    ("mp4", ".mp4", True)])
def test_every_format_reads_and_identical_files_pass(tmp_path, kind, suffix, video):
    generator = torch.Generator().manual_seed(0)
    shape = (1, 3, 4, 16, 16) if video else (1, 3, 16, 16)
    tensor = torch.rand(shape, generator=generator) * 2 - 1
    path = tmp_path / f"x{suffix}"
    _write(kind, path, tensor)
    loaded = next(iter(read_outputs(path).values()))
    assert tuple(loaded.shape) == shape
    if kind in ("npy", "pt"):
        assert torch.equal(loaded, tensor)
    elif kind in ("png", "frames"):
        assert (loaded - tensor).abs().max() <= 1 / 127.5 + 1e-6, "8-bit rounding only"
    assert _run(tmp_path, path, path) == 0


def test_unusable_inputs_exit_2_with_the_reason(tmp_path, capsys):
    save_file({"image": torch.zeros(1, 3, 8, 8)}, tmp_path / "a.safetensors")
    save_file({"image": torch.zeros(1, 3, 8, 4)}, tmp_path / "b.safetensors")
    (tmp_path / "broken.safetensors").write_bytes(b"not a safetensors file")
    (tmp_path / "c.txt").write_text("x")
    assert _run(tmp_path, tmp_path / "a.safetensors", tmp_path / "b.safetensors") == 2
    assert "shapes differ" in capsys.readouterr().err
    assert _run(tmp_path, tmp_path / "a.safetensors", tmp_path / "broken.safetensors") == 2
    assert "cannot be read" in capsys.readouterr().err
    assert _run(tmp_path, tmp_path / "a.safetensors", tmp_path / "c.txt") == 2
    assert "unknown format" in capsys.readouterr().err
    assert _run(tmp_path, tmp_path / "a.safetensors", tmp_path / "missing.npy") == 2
    with pytest.raises(UnusableInput, match="not a tensor"):
        torch.save({"a": 1}, tmp_path / "d.pt")
        read_outputs(tmp_path / "d.pt")


def test_its_metrics_equal_the_jobs_metrics_on_the_same_tensors(cli, tmp_path):
    """A job's saved reference and device outputs, compared standalone, give the job's numbers."""
    result, job = cli("model=tiny_flux2_decoder", *TINY_RUN, "baseline.process=in-process",
                      "dtype=bfloat16")
    assert result.returncode in (0, 1), result.stdout + result.stderr
    record = read_record(job)
    tensors = record["artifacts"]
    reference, device = job / tensors["reference_outputs"], job / tensors["device_outputs"]
    code = _run(tmp_path, reference, device, "--metric", record["config"]["metric"]["name"],
                "--dtype", "bfloat16")
    mine = json.loads((tmp_path / "out" / "record.json").read_text())["metrics"]
    for name, entry in record["metrics"].items():
        if name in mine and isinstance(entry, dict) and isinstance(entry.get("value"), float):
            close = math.isclose(mine[name]["value"], entry["value"], rel_tol=1e-9, abs_tol=1e-12)
            assert close, name
    assert code == (1 if record["verdict"] == "FAIL" else 0)


def test_a_layers_5d_npy_outputs_compared_with_the_jobs_dtype_and_max_abs_err_printed(tmp_path,
                                                                                      capsys):
    """The conv_in job's outputs: 5-D activations (no video), saved as float32 .npy beside a bf16
    job's record."""
    generator = torch.Generator().manual_seed(0)
    reference = torch.randn(1, 64, 2, 4, 4, generator=generator)
    candidate = reference.bfloat16().float()
    job = tmp_path / "job"
    job.mkdir()
    np.save(job / "cpu_output.npy", reference.numpy())
    np.save(job / "npu_output.npy", candidate.numpy())
    (job / "record.json").write_text(json.dumps({"job": {"dtype": "bfloat16"}}))
    assert _run(tmp_path, job / "cpu_output.npy", job / "npu_output.npy") in (0, 1)
    out = capsys.readouterr().out
    record = json.loads((tmp_path / "out" / "record.json").read_text())
    assert record["metric"] == "regression" and record["dtype_rules"] == "bfloat16"
    assert "record.json" in record["dtype_from"]
    line = next(line for line in out.splitlines() if line.startswith("max_abs_err"))
    printed = float(line.split()[1])
    assert printed == pytest.approx(record["metrics"]["max_abs_err"]["value"], rel=1e-3)
    # data, never trusted blindly
    (job / "record.json").write_text(json.dumps({"job": {"dtype": "import os"}}))
    assert _run(tmp_path, job / "cpu_output.npy", job / "npu_output.npy") in (0, 1)
    assert json.loads((tmp_path / "out" / "record.json").read_text())["dtype_rules"] == "float32"


@pytest.mark.parametrize("side", ["candidate", "reference"])
def test_a_float8_output_is_refused_not_judged_by_float32_rules(tmp_path, capsys, side):
    """Before: an F8_E4M3 file was judged "with float32 rules from the candidate file's dtype"."""
    values = torch.linspace(-1, 1, 3 * 8 * 8).reshape(1, 3, 8, 8)
    save_file({"image": values}, tmp_path / "f32.safetensors")
    save_file({"image": values.to(torch.float8_e4m3fn)}, tmp_path / "f8.safetensors")
    files = [tmp_path / "f32.safetensors", tmp_path / "f8.safetensors"]
    assert _run(tmp_path, *(files if side == "candidate" else files[::-1])) == 2
    err = capsys.readouterr().err
    assert "image is torch.float8_e4m3fn, a float8 dtype without verdict rules" in err
    assert "cast both outputs to bfloat16 or float32" in err and not (tmp_path / "out").exists()


def test_a_lying_safetensors_header_keeps_safetensors_own_message(tmp_path, capsys):
    """Header length past the file's end (this held already; the saved-run reader now does too)."""
    save_file({"image": torch.zeros(1, 3, 8, 8)}, tmp_path / "a.safetensors")
    data = (tmp_path / "a.safetensors").read_bytes()
    (tmp_path / "b.safetensors").write_bytes((10 ** 9).to_bytes(8, "little") + data[8:])
    assert _run(tmp_path, tmp_path / "a.safetensors", tmp_path / "b.safetensors") == 2
    err = capsys.readouterr().err
    assert "b.safetensors cannot be read as .safetensors: SafetensorError" in err
