"""Deterministic inputs: the structured clip, and the summaries for the record."""

from __future__ import annotations

import math

import torch

from ascendbench.tasks.inputs import structured_clip, summarize, tensor_stats


def test_same_seed_same_bytes_other_seed_other_clip():
    first, again = structured_clip(2, 5, 24, 32, seed=7), structured_clip(2, 5, 24, 32, seed=7)
    assert first.shape == (2, 3, 5, 24, 32) and first.dtype == torch.float32
    assert torch.equal(first, again)
    assert not torch.equal(first, structured_clip(2, 5, 24, 32, seed=8))
    assert not torch.equal(first[0], first[1])  # each clip of a batch draws its own scene


def test_values_in_range_with_motion_and_edges():
    clip = structured_clip(1, 9, 64, 64, seed=42)[0]
    assert clip.min() >= -1 and clip.max() <= 1 and clip.std() > 0.2
    assert (clip[:, 1:] - clip[:, :-1]).abs().mean() > 0.01                 # frames change: motion
    horizontal = (clip[..., 1:] - clip[..., :-1]).abs()
    assert horizontal.max() > 0.5
    assert horizontal.median() < 0.1             # sharp edges, smooth regions


def test_stats_match_torch_and_list_both_ends():
    tensor = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    stats = tensor_stats(tensor)
    assert stats["mean"] == 5.5 and stats["min"] == 0.0 and stats["max"] == 11.0
    assert math.isclose(stats["std"], float(tensor.double().std(unbiased=False)))
    assert stats["first"] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert stats["last"] == [7.0, 8.0, 9.0, 10.0, 11.0]
    assert stats["nonfinite"] == 0


def test_non_finite_values_are_counted_not_averaged():
    stats = tensor_stats(torch.tensor([1.0, float("nan"), float("-inf"), 3.0]))
    assert stats["nonfinite"] == 2 and stats["mean"] == 2.0 and stats["max"] == 3.0
    empty = tensor_stats(torch.tensor([float("nan")]))
    assert empty["mean"] is None and empty["nonfinite"] == 1 and empty["last"] == []


def test_summary_of_half_and_integer_tensors():
    summary = summarize({"latent": torch.ones(2, 3, dtype=torch.bfloat16),
                         "tokens": torch.tensor([[4, 9]])})
    assert summary["latent"]["dtype"] == "bfloat16" and summary["latent"]["shape"] == [2, 3]
    assert summary["latent"]["mean"] == 1.0 and summary["tokens"]["max"] == 9.0
