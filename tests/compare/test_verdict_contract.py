"""Verdicts inside their contract: small values judged, cosine of unresolvable norms reported only,
complex outputs refused, 8-bit pixels judged as images, a bf16-looking float32 candidate hinted."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from ascendbench.compare.__main__ import main
from ascendbench.metrics.evaluators import TokenEvaluator
from ascendbench.metrics.suite import MetricSuite


def _compare(tmp_path, reference, candidate, *args):
    """Both sides saved as safetensors, compared; (exit code, record)."""
    save_file(reference, tmp_path / "ref.safetensors")
    save_file(candidate, tmp_path / "cand.safetensors")
    out = tmp_path / "out"
    code = main([str(tmp_path / "ref.safetensors"), str(tmp_path / "cand.safetensors"),
                 "--out", str(out), *args])
    return code, json.loads((out / "record.json").read_text()) if code != 2 else None


def _relu_randn():
    return torch.relu(torch.randn(4096, generator=torch.Generator().manual_seed(0)))


def test_bf16_zeros_turned_to_a_tenth_fail_the_small_value_rule(tmp_path):
    reference = _relu_randn()
    candidate = reference.bfloat16()
    candidate[reference == 0] = 0.1  # half the elements: mean_rel_err and cosine do not see it
    code, record = _compare(tmp_path, {"x": reference}, {"x": candidate})
    assert code == 1 and record["verdict"] == "FAIL" and record["dtype_rules"] == "bfloat16"
    entry = record["metrics"]["small_value_abs_err_ratio"]
    assert entry["verdict"] == "FAIL" and entry["value"] > 0.99
    assert record["metrics"]["mean_rel_err"]["verdict"] == "PASS"  # what let it pass before
    code, record = _compare(tmp_path, {"x": reference}, {"x": reference.bfloat16()})
    assert code == 0 and record["metrics"]["small_value_abs_err_ratio"]["verdict"] == "PASS"


@pytest.mark.parametrize("candidate_value, verdict", [(1e-40, "PASS"), (0.5, "FAIL")])
def test_cosine_of_unresolvable_norms_is_reported_not_judged(tmp_path, capsys, candidate_value,
                                                             verdict):
    reference = torch.zeros(64)
    code, record = _compare(tmp_path, {"x": reference},
                            {"x": torch.full((64,), candidate_value)})
    cosine = record["metrics"]["cosine"]
    assert record["verdict"] == verdict and code == (verdict == "FAIL")
    if verdict == "PASS":  # 1e-40 everywhere: both norms below what float32 resolves
        assert cosine["value"] == 0.0 and cosine["verdict"] is None
        assert cosine["would_be"] == "FAIL" and "both norms below" in cosine["not_judged"]
        assert "not judged: both norms below" in capsys.readouterr().out
        row = (tmp_path / "out" / "compare.csv").read_text()
        assert "cosine not judged" in row
    else:  # a real output against a zero reference: the cosine still fails
        assert cosine["verdict"] == "FAIL"


def test_complex_outputs_are_refused_with_the_way_out(tmp_path, capsys):
    value = torch.randn(8, dtype=torch.complex64)
    code, _ = _compare(tmp_path, {"x": value}, {"x": value * 2})
    err = capsys.readouterr().err
    assert code == 2 and "'x' is x [8] complex64" in err and "torch.view_as_real" in err


def test_uint8_images_are_judged_by_the_image_suite(tmp_path):
    generator = torch.Generator().manual_seed(0)
    image = torch.randint(0, 256, (1, 3, 32, 32), dtype=torch.uint8, generator=generator)
    noisy = (image.int() + torch.randint(-40, 41, image.shape, generator=generator))
    code, record = _compare(tmp_path, {"img": image}, {"img": noisy.clamp(0, 255).to(torch.uint8)})
    assert record["metric"] == "image" and "token_agreement" not in record["metrics"]
    assert record["metrics"]["image_psnr_db"]["verdict"] == "FAIL" and code == 1
    code, record = _compare(tmp_path, {"img": image}, {"img": image})
    assert code == 0 and record["metrics"]["image_psnr_db"]["verdict"] == "PASS"


def test_integer_token_ids_stay_with_the_tokens_suite(tmp_path):
    ids = torch.arange(64, dtype=torch.int64).reshape(1, 64)
    code, record = _compare(tmp_path, {"ids": ids}, {"ids": ids})
    assert code == 0 and record["metric"] == "tokens"
    assert record["metrics"]["token_agreement"]["verdict"] == "PASS"


def test_a_tokens_suite_leaves_8_bit_pictures_to_the_pixel_metrics():
    suite = MetricSuite("tokens", {"tokens": TokenEvaluator()})
    frames = torch.zeros(1, 3, 2, 8, 8, dtype=torch.uint8)
    results = suite.evaluate({"video": frames}, {"video": frames + 1}, {}, 1e-5, 1e-3)
    assert "token_agreement" not in results and "skipped" in results["tokens"]


def _bf16_valued(seed, noise):
    generator = torch.Generator().manual_seed(seed)
    values = torch.randn(1, 8, 64, 64, generator=generator)
    return (values + noise * torch.randn(values.shape, generator=generator)).bfloat16().float()


def test_float32_files_of_bf16_values_failing_get_the_dtype_hint(tmp_path, capsys):
    reference, candidate = _bf16_valued(0, 0.0), _bf16_valued(0, 0.003)
    np.save(tmp_path / "cpu_output.npy", reference.numpy())
    np.save(tmp_path / "npu_output.npy", candidate.numpy())
    args = [str(tmp_path / "cpu_output.npy"), str(tmp_path / "npu_output.npy"), "--out",
            str(tmp_path / "out")]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "float32 rules" in out
    assert "the values look bfloat16; rerun with its rules: --dtype bfloat16" in out
    main([*args, "--dtype", "bfloat16"])
    assert "hint:" not in capsys.readouterr().out
    np.save(tmp_path / "npu_output.npy", (candidate + 1e-4).numpy())  # not bf16 values: no hint
    main(args)
    assert "hint:" not in capsys.readouterr().out
