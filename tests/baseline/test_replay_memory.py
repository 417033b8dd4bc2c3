"""The replay process's memory: the precision ``auto`` chooses, the chunked local error, the
recorded calls' file names (data), and the peak-RSS check against the plan on a planted
under-estimate."""

from __future__ import annotations

import math

import pytest
import torch

from ascendbench.baseline import replay_child
from ascendbench.baseline.replay_memory import choose_precision, memory_check
from ascendbench.compare.capture import call_file

GB = 1e9


def _plan(precision: str, mb: float) -> dict:
    return {"precision": precision, "reference_process_mb": mb,
            "largest_module": {"name": "decoder.up_blocks.2"},
            "child_imports_mb": 1000.0, "per_module": []}


def test_auto_takes_float32_only_where_float64_does_not_fit() -> None:
    sizes = {"float64": 19_700.0, "float32": 12_040.0}
    chosen = choose_precision("auto", lambda p: _plan(p, sizes[p]), int(20.5 * GB))
    assert chosen["precision"] == "float32" and chosen["fits"]
    why = "auto: float32, because in float64 the process needs about 19.7 GB"
    assert chosen["choice"].startswith(why)
    roomy = choose_precision("auto", lambda p: _plan(p, sizes[p]), int(64 * GB))
    assert roomy["precision"] == "float64" and roomy["fits"]
    forced = choose_precision("float64", lambda p: _plan(p, sizes[p]), int(20.5 * GB))
    assert forced["precision"] == "float64" and not forced["fits"], "a forced precision stays"
    tight = choose_precision("auto", lambda p: _plan(p, sizes[p]), int(10 * GB))
    assert tight["precision"] == "float32" and not tight["fits"]


def test_the_chunked_local_error_equals_the_whole_tensor_formula(monkeypatch) -> None:
    monkeypatch.setattr(replay_child, "CHUNK", 7)  # many chunks, the last one short
    generator = torch.Generator().manual_seed(0)
    ref = torch.randn(5, 11, generator=generator, dtype=torch.float64)
    dev = (ref + 1e-3 * torch.randn(5, 11, generator=generator, dtype=torch.float64)).float()
    got = replay_child.local_error(ref, dev)
    diff = dev.double() - ref
    assert got["local_rel_err"] == pytest.approx(float(diff.norm() / ref.norm()), rel=1e-12)
    assert got["max_abs_err"] == pytest.approx(float(diff.abs().max()), rel=1e-12)
    dot = torch.dot(ref.flatten(), dev.double().flatten())
    cosine = float(dot / (ref.norm() * dev.double().norm()))
    assert got["cosine"] == pytest.approx(cosine, rel=1e-12)
    dev[2, 3] = math.nan
    assert replay_child.local_error(ref, dev)["local_rel_err"] == math.inf


@pytest.mark.parametrize("name", ["../0.safetensors", "/etc/passwd", "0.json",
                                  ".hidden.safetensors", None])
def test_a_call_file_outside_the_calls_folder_is_refused(tmp_path, name) -> None:
    with pytest.raises(ValueError, match="not a file of"):
        call_file(str(tmp_path), {"key": "decoder.conv_in#0", "file": name})


def test_the_peak_rss_check_flags_a_planted_under_estimate() -> None:
    plan = {"child_imports_mb": 1000.0, "reference_process_mb": 1400.0,
            "per_module": [{"name": "a", "calls": 1, "need_mb": 400.0},
                           {"name": "b", "calls": 1, "need_mb": 10.0}]}
    measured = [{"module": "a", "peak_rss_mb": 1300.0}, {"module": "b", "peak_rss_mb": 1200.0}]
    check = memory_check(plan, measured)
    assert check["under_estimated"] == [] and check["measured_peak_rss_mb"] == 1300.0
    planted = {**plan, "child_imports_mb": 100.0}  # imports counted at a tenth of what they are
    assert memory_check(planted, measured)["under_estimated"] == ["a", "b"]
    assert "skipped" in memory_check(plan, [{"module": "a", "peak_rss_mb": None}])
