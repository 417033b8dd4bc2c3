"""FLOP counting: exact counts of known layers, the extra attention formulas, and uncounted kernels.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import sdpa_flop_count

from ascendbench.bench.flops import count_flops, flops_section, npu_fusion_attention_flop


@torch.library.custom_op("ascendbench_test::fused_attention", mutates_args=())
def fused_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Stands in for a vendor's fused attention kernel: no FLOP formula is known for it."""
    return torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v


def test_linear_and_convolution_are_counted_exactly():
    torch.manual_seed(0)
    linear, conv = torch.nn.Linear(16, 32), torch.nn.Conv2d(3, 8, kernel_size=3, padding=1)
    x, image = torch.randn(4, 16), torch.randn(2, 3, 10, 12)
    with torch.inference_mode():
        count = count_flops(lambda: (linear(x), conv(image)))
    assert count.by_op["aten.addmm"] == 2 * 4 * 16 * 32
    assert count.by_op["aten.convolution"] == 2 * (2 * 8 * 10 * 12) * (3 * 3 * 3)
    assert count.flops == sum(count.by_op.values()) and count.complete


def test_cpu_scaled_dot_product_attention_is_counted():
    q = torch.randn(2, 4, 64, 16)
    count = count_flops(lambda: F.scaled_dot_product_attention(q, q, q))
    assert count.flops == 4 * 2 * 4 * 64 * 64 * 16 == sdpa_flop_count(q.shape, q.shape, q.shape)
    assert count.complete, "torch's own counter misses this CPU kernel; ours must not"


def test_a_fused_kernel_without_formula_is_listed_not_silently_zero():
    q = torch.randn(1, 2, 8, 4)
    count = count_flops(lambda: (fused_attention(q, q, q),
                                 torch.nn.functional.linear(q, torch.randn(4, 4))))
    assert count.uncounted_ops == {"ascendbench_test.fused_attention": 1}
    assert not count.complete and count.flops > 0
    section = flops_section(count, median_ms=1.0, peak={"tflops": 1.0, "source": "test"},
                            dtype="float32")
    assert section["complete"] is False
    assert "ascendbench_test.fused_attention" in section["uncounted_ops"]


def test_heavy_op_patterns_are_configurable():
    q = torch.randn(1, 2, 8, 4)
    count = count_flops(lambda: fused_attention(q, q, q), heavy_ops=["matmul"])
    assert count.uncounted_ops == {} and count.flops == 0


@pytest.mark.parametrize("layout", ["BNSD", "BSND", "BSH", "SBH"])
def test_npu_fusion_attention_formula_matches_sdpa_in_every_layout(layout):
    # grouped-query attention: 8 query heads, 2 kv heads
    b, n, n_kv, sq, skv, d = 2, 8, 2, 64, 96, 16
    q_bnsd, kv_bnsd = (b, n, sq, d), (b, n_kv, skv, d)
    as_layout = {
        "BNSD": lambda s: s,
        "BSND": lambda s: (s[0], s[2], s[1], s[3]),
        "BSH": lambda s: (s[0], s[2], s[1] * s[3]),
        "SBH": lambda s: (s[2], s[0], s[1] * s[3]),
    }[layout]
    got = npu_fusion_attention_flop(as_layout(q_bnsd), as_layout(kv_bnsd), as_layout(kv_bnsd), n,
                                    layout)
    assert got == sdpa_flop_count(q_bnsd, kv_bnsd, kv_bnsd) == 4 * b * n * sq * skv * d


def test_varlen_layout_has_no_formula():
    with pytest.raises(ValueError, match="TND"):
        npu_fusion_attention_flop((128, 8, 16), (128, 8, 16), (128, 8, 16), 8, "TND")


def test_flops_section_derives_tflops_and_mfu_from_the_median():
    a, b = torch.randn(64, 128), torch.randn(256, 128)
    count = count_flops(lambda: torch.nn.functional.linear(a, b))
    section = flops_section(count, median_ms=2.0,
                            peak={"tflops": 0.5, "source": "sheet", "entry": "X"}, dtype="bfloat16")
    achieved = count.flops / 2e-3 / 1e12
    assert section["per_call"] == 2 * 64 * 128 * 256
    assert section["achieved_tflops"] == pytest.approx(achieved)
    assert section["mfu"] == pytest.approx(achieved / 0.5) and section["peak_entry"] == "X"
    missing = flops_section(count, median_ms=2.0, peak={"tflops": None, "missing": "no entry"},
                            dtype="float32")
    assert missing["mfu"] is None and missing["peak_missing"] == "no entry"
    skipped = flops_section(None, median_ms=2.0, peak={}, dtype="float32",
                            error="bench.flops.enabled=false")
    assert skipped["skipped"] == "bench.flops.enabled=false"
