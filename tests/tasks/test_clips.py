"""The synthetic structured clip: deterministic, in range, with motion and edges."""

from __future__ import annotations

import torch

from ascendbench.tasks.clips import structured_clip


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
    assert horizontal.max() > 0.5 and horizontal.median() < 0.1             # sharp edges, smooth regions
