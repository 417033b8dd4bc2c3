"""``_native_npu`` only within its contract: float32 skipped, LTX masks converted, kernels named.

The mask semantics are checked against the installed diffusers' own ``_maybe_modify_attn_mask_npu``
(what its ``_native_npu`` hands to ``npu_fusion_attention``, whose ``atten_mask`` is True = masked).
"""

from __future__ import annotations

import pytest
import torch

from ascendbench.errors import PatchError
from ascendbench.patches.attention_backend import (
    FUSED,
    SDPA_FUSED,
    SDPA_MATH,
    KernelLog,
    boolean_mask,
    sdpa_kernel,
)
from ascendbench.patches.registry import patches_applied
from ascendbench.report.variants import patches_cell


def _ltx_mask(batch=2, heads=2, keys=6, padded=2):
    """LTX's mask: (1 - mask) * -10000, viewed (batch, heads, 1, keys) by its processor."""
    mask = torch.ones(batch, keys)
    mask[:, keys - padded:] = 0
    additive = (1 - mask) * -10000.0
    return additive[:, None, None, :].expand(batch, heads, 1, keys)


def _npu_view(mask, batch=2, heads=2, queries=3, keys=6):
    from diffusers.models.attention_dispatch import _maybe_modify_attn_mask_npu

    query, key = torch.zeros(batch, queries, heads, 4), torch.zeros(batch, keys, heads, 4)
    return _maybe_modify_attn_mask_npu(query, key, mask)


def test_ltx_float_mask_becomes_what_npu_fusion_attention_expects():
    converted = _npu_view(boolean_mask(_ltx_mask(), batch=2))
    assert converted.dtype == torch.bool and converted.shape == (2, 1, 3, 6)
    assert converted[..., 4:].all(), "the padded keys are the masked ones"
    assert not converted[..., :4].any()


def test_the_raw_float_mask_would_reach_the_kernel_inverted():
    """The planted fault: LTX's additive mask as is into _native_npu masks the real tokens."""
    raw = _npu_view(_ltx_mask())
    assert raw is not None and raw.dtype == torch.bool
    assert raw[..., :4].all() and not raw[..., 4:].any()


def test_a_bias_or_a_per_head_mask_is_refused():
    with pytest.raises(PatchError, match="a bias, not a mask"):
        boolean_mask(torch.full((1, 1, 1, 4), -0.5), batch=1)
    per_head = _ltx_mask().clone()
    per_head[:, 1, :, 0] = -10000.0
    with pytest.raises(PatchError, match="differs between heads"):
        boolean_mask(per_head, batch=2)


def _call(log, mask):
    query = torch.zeros(2, 3, 2, 4)
    return log(query=query, key=torch.zeros(2, 6, 2, 4), value=torch.zeros(2, 6, 2, 4),
               attn_mask=mask)


def test_a_diffusers_that_drops_the_mask_is_refused_when_the_mask_hides_keys():
    seen = []

    def native_npu_036(query, key, value, dropout_p=0.0, scale=None, return_lse=False,
                       _parallel_config=None):
        seen.append("called")  # diffusers 0.36.0's signature: no attn_mask
        return query

    log = KernelLog("_native_npu", native_npu_036, accepts_mask=False)
    _call(log, torch.zeros(2, 2, 1, 6))  # nothing masked: dropping it changes nothing
    with pytest.raises(PatchError, match="drops the attention mask"):
        _call(log, _ltx_mask())
    assert seen == ["called"] and log.summary() == {"kernels": {FUSED: 1}, "masks": {"float": 2}}


def test_sdpa_kernel_follows_torch_npus_own_routing():
    """op-plugin's SDPA: fused with no or a boolean mask on Ascend910B1+, else math."""
    import types

    on_npu = types.SimpleNamespace(device=torch.device("npu", 0) if hasattr(torch, "npu") else
                                   types.SimpleNamespace(type="npu"), shape=(1, 3, 2, 4))
    assert sdpa_kernel(on_npu, None, "Ascend910B4") == SDPA_FUSED
    assert sdpa_kernel(on_npu, torch.ones(1, 3, dtype=torch.bool), "Ascend910_9362") == SDPA_FUSED
    float_mask = torch.zeros(1, 3)
    assert sdpa_kernel(on_npu, float_mask, "Ascend910B4") == SDPA_MATH, "a float mask: math"
    assert sdpa_kernel(on_npu, None, "Ascend910A") == SDPA_MATH, "below Ascend910B1: no fused SDPA"
    assert sdpa_kernel(torch.zeros(1, 3, 2, 4), None, None) == "torch SDPA on cpu"


@pytest.fixture(scope="module")
def transformer():
    from diffusers import FluxTransformer2DModel

    torch.manual_seed(0)
    return FluxTransformer2DModel(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1,
                                  attention_head_dim=8, num_attention_heads=2,
                                  joint_attention_dim=8, pooled_projection_dim=8,
                                  axes_dims_rope=(2, 2, 4)).eval()


def _run(model):
    torch.manual_seed(0)
    with torch.no_grad():
        model(hidden_states=torch.randn(1, 4, 4), encoder_hidden_states=torch.randn(1, 3, 8),
              pooled_projections=torch.randn(1, 8), timestep=torch.tensor([1.0]),
              img_ids=torch.zeros(4, 3), txt_ids=torch.zeros(3, 3))


def test_float32_with_native_npu_is_skipped_saying_why(transformer):
    with patches_applied(["diffusers_attention_backend"], transformer, "npu", "float32") as infos:
        pass
    assert "dtype=float32" in infos[0]["skipped"] and "bfloat16/float16 only" in infos[0]["skipped"]
    cell = patches_cell({"patches": __import__("json").dumps({"device": infos})})
    assert "skipped: dtype=float32" in cell


def test_the_record_and_the_ab_cell_name_the_kernel_each_call_ran(transformer):
    from diffusers.models.attention_dispatch import AttentionBackendName, _AttentionBackendRegistry

    original = _AttentionBackendRegistry._backends[AttentionBackendName.NATIVE]
    spec = [{"name": "diffusers_attention_backend", "backend": "native", "devices": ["cpu"]}]
    with patches_applied(spec, transformer, "cpu", "float32") as infos:
        _run(transformer)
    assert _AttentionBackendRegistry._backends[AttentionBackendName.NATIVE] is original, "restored"
    assert infos[0]["kernels"] == {"torch SDPA on cpu": 2} and infos[0]["masks"] == {"none": 2}
    cell = patches_cell({"patches": __import__("json").dumps({"device": infos})})
    assert "ran: torch SDPA on cpu x2" in cell
