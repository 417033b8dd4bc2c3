"""Dense-mask attention against torch's real (eager) flex_attention on CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import (
    AuxRequest,
    BlockMask,
    create_block_mask,
    flex_attention,
)

from ascendbench.patches.flex_attention_dense import (
    DenseBlockMask,
    MaskGrid,
    block_mask_to_dense,
    dense_create_block_mask,
    dense_flex_attention,
    evaluate_mask_mod,
)

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")

BATCH, HEADS, LENGTH, DIM = 2, 2, 200, 16   # 200: one full and one partial 128-block
VALID = torch.tensor([150, 200])            # per-sample valid lengths of the padded mask


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def padded(b, h, q_idx, kv_idx):  # padding queries attend to nothing: fully masked rows
    return (q_idx < VALID[b]) & (kv_idx < VALID[b])


def block_diagonal(b, h, q_idx, kv_idx):
    return q_idx // 50 == kv_idx // 50


MASKS = {"causal": causal, "padded": padded, "block_diagonal": block_diagonal}


def qkv(dtype=torch.float32, heads=HEADS, kv_heads=HEADS, seed=0):
    generator = torch.Generator().manual_seed(seed)
    shape = lambda h: (BATCH, h, LENGTH, DIM)  # noqa: E731
    return (torch.randn(shape(heads), generator=generator, dtype=dtype),
            torch.randn(shape(kv_heads), generator=generator, dtype=dtype),
            torch.randn(shape(kv_heads), generator=generator, dtype=dtype))


@pytest.mark.parametrize("name", MASKS)
def test_matches_eager_flex_attention_float32(name):
    q, k, v = qkv()
    block_mask = create_block_mask(MASKS[name], BATCH, None, LENGTH, LENGTH, device="cpu")
    expected = flex_attention(q, k, v, block_mask=block_mask)
    for mask in (block_mask,
                 dense_create_block_mask(MASKS[name], BATCH, None, LENGTH, LENGTH, "cpu")):
        out = dense_flex_attention(q, k, v, block_mask=mask)
        assert out.dtype == q.dtype and not out.isnan().any()
        assert (out - expected).abs().max() < 1e-6


@pytest.mark.parametrize("name", MASKS)
def test_matches_eager_flex_attention_float64(name):
    q, k, v = qkv(torch.float64)
    block_mask = create_block_mask(MASKS[name], None, None, LENGTH, LENGTH, device="cpu")
    expected = flex_attention(q, k, v, block_mask=block_mask)
    assert (dense_flex_attention(q, k, v, block_mask=block_mask) - expected).abs().max() < 1e-12


def test_fully_masked_rows_are_zero_like_flex():
    q, k, v = qkv()
    mask = dense_create_block_mask(padded, BATCH, None, LENGTH, LENGTH)
    out = dense_flex_attention(q, k, v, block_mask=mask)
    assert torch.equal(out[0, :, 150:], torch.zeros_like(out[0, :, 150:]))
    assert out[1].abs().sum() > 0


@pytest.mark.parametrize("name", MASKS)
def test_log_sum_exp_matches_flex(name):
    q, k, v = qkv()
    block_mask = create_block_mask(MASKS[name], BATCH, None, LENGTH, LENGTH, device="cpu")
    expected_out, expected = flex_attention(q, k, v, block_mask=block_mask,
                                            return_aux=AuxRequest(lse=True))
    out, aux = dense_flex_attention(q, k, v, block_mask=block_mask, return_aux=AuxRequest(lse=True))
    assert (out - expected_out).abs().max() < 1e-6 and aux.max_scores is None
    assert torch.equal(torch.isinf(aux.lse), torch.isinf(expected.lse))
    finite = torch.isfinite(expected.lse)
    assert (aux.lse[finite] - expected.lse[finite]).abs().max() < 1e-5


def test_max_scores_are_the_masked_row_maxima():  # flex cannot on CPU: computed directly
    q, k, v = qkv(torch.float64)
    dense = dense_create_block_mask(padded, BATCH, None, LENGTH, LENGTH)
    _, aux = dense_flex_attention(q, k, v, block_mask=dense, return_aux=AuxRequest(max_scores=True))
    scores = (q @ k.transpose(-2, -1)) / DIM**0.5
    mask = evaluate_mask_mod(padded, MaskGrid(BATCH, HEADS, LENGTH, LENGTH, "cpu"))
    expected = scores.masked_fill(~mask, float("-inf")).max(dim=-1).values
    assert torch.equal(aux.max_scores, expected) and aux.lse is None


def test_score_mod_and_mask_together_match_flex():
    def relative_bias(score, b, h, q_idx, kv_idx):
        return score + 0.01 * (q_idx - kv_idx) * (h + 1)

    q, k, v = qkv()
    block_mask = create_block_mask(causal, None, None, LENGTH, LENGTH, device="cpu")
    expected = flex_attention(q, k, v, score_mod=relative_bias, block_mask=block_mask)
    out = dense_flex_attention(q, k, v, score_mod=relative_bias, block_mask=block_mask)
    assert (out - expected).abs().max() < 1e-6


def test_grouped_query_attention_and_scale_match_flex():
    q, k, v = qkv(heads=4, kv_heads=2)
    block_mask = create_block_mask(block_diagonal, None, None, LENGTH, LENGTH, device="cpu")
    expected = flex_attention(q, k, v, block_mask=block_mask, enable_gqa=True, scale=0.3)
    out = dense_flex_attention(q, k, v, block_mask=block_mask, enable_gqa=True, scale=0.3)
    assert (out - expected).abs().max() < 1e-6


def test_no_mask_is_plain_attention():
    q, k, v = qkv()
    expected = F.scaled_dot_product_attention(q, k, v)
    assert torch.allclose(dense_flex_attention(q, k, v), expected, atol=1e-7)


def test_block_structure_of_a_hand_made_block_mask_is_honoured():
    # Two 4x4 blocks of 2-token blocks: block row 0 sees kv block 0 (partial: causal inside),
    # block row 1 sees kv block 1 fully; kv block 0 is absent for row 1 although the mask_mod
    # allows it.
    kv_num, kv_idx = torch.tensor([[[1, 0]]]), torch.tensor([[[[0, 0], [0, 0]]]])
    full_num, full_idx = torch.tensor([[[0, 1]]]), torch.tensor([[[[0, 0], [1, 0]]]])
    block_mask = BlockMask.from_kv_blocks(kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=2,
                                          mask_mod=causal)
    dense = block_mask_to_dense(block_mask, MaskGrid(1, 1, 4, 4, "cpu"))[0, 0].int()
    assert dense.tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]]


def test_mask_mod_grid_keeps_broadcast_dimensions_small():
    assert evaluate_mask_mod(causal, MaskGrid(8, 16, 5, 7, "cpu")).shape == (1, 1, 5, 7)
    assert evaluate_mask_mod(padded, MaskGrid(2, 16, 5, 7, "cpu")).shape == (2, 1, 5, 7)


def test_mask_mod_that_needs_scalars_falls_back_to_vmap():
    def scalar_only(b, h, q_idx, kv_idx):  # .view(()) works on vmap's scalars, not on index grids
        return q_idx.view(()) >= kv_idx.view(())

    grid = MaskGrid(1, 1, 6, 6, "cpu")
    assert torch.equal(evaluate_mask_mod(scalar_only, grid), evaluate_mask_mod(causal, grid))


def test_dense_block_mask_caches_per_size_and_mimics_block_mask():
    mask = dense_create_block_mask(causal, None, None, LENGTH, LENGTH, device="cpu")
    assert isinstance(mask, DenseBlockMask) and mask.shape == (1, 1, LENGTH, LENGTH)
    first = mask.masks(MaskGrid(BATCH, HEADS, LENGTH, LENGTH, "cpu"))
    assert mask.masks(MaskGrid(BATCH, HEADS, LENGTH, LENGTH, "cpu")) is first
    assert first[0].shape == (1, 1, LENGTH, LENGTH) and bool(first[1].all())
    assert mask.to("cpu").seq_lengths == (LENGTH, LENGTH)


def test_drop_ins_take_the_call_forms_of_the_originals():
    q, k, v = qkv(heads=4, kv_heads=2)
    # separate_full_blocks: a newer torch argument, ignored
    by_name = dense_create_block_mask(mask_mod=causal, B=None, H=None, Q_LEN=LENGTH, KV_LEN=LENGTH,
                                      device="cpu", BLOCK_SIZE=64, separate_full_blocks=True)
    positional = dense_create_block_mask(causal, None, None, LENGTH, LENGTH, "cpu", 64, False)
    assert by_name.shape == positional.shape == (1, 1, LENGTH, LENGTH)
    keyword = dense_flex_attention(q, k, v, block_mask=positional, scale=0.3, enable_gqa=True)
    assert torch.equal(dense_flex_attention(q, k, v, None, positional, 0.3, True), keyword)
    with pytest.raises(TypeError):
        dense_flex_attention(q, k, v, None, positional, 0.3, True, False, None,
                             AuxRequest(lse=True))  # keyword-only
    with pytest.raises(TypeError):
        dense_flex_attention(q, k, v, None, block_mask=positional,
                             score_mod=None)  # given twice, as for flex
