"""Token metrics on hand-built id tensors."""

from __future__ import annotations

import torch

from ascendbench.metrics.evaluators import TokenEvaluator


def test_agreement_range_and_unique_ids():
    ref = torch.tensor([[1, 2, 3, 4, 5, 5]])
    dev = torch.tensor([[1, 2, 3, 4, 9, -1]])
    rules = {"token_agreement": {"min": 0.99}, "tokens_out_of_range": {"max": 0}}
    out = TokenEvaluator(codebook_size=8).evaluate({"tokens": ref}, {"tokens": dev}, rules,
                                                   atol=0, rtol=0)
    agreement, out_of_range = out["token_agreement"], out["tokens_out_of_range"]
    assert agreement["value"] == 4 / 6 and agreement["verdict"] == "FAIL"
    assert out_of_range["value"] == 2 and out_of_range["verdict"] == "FAIL"
    assert out["tokens_unique"]["value"] == 6 and out["tokens_unique_reference"]["value"] == 5


def test_without_a_codebook_size_the_range_check_is_skipped_and_floats_are_ignored():
    ref = {"tokens": torch.tensor([3, 4]), "recon": torch.zeros(2)}
    out = TokenEvaluator().evaluate(ref, {k: v.clone() for k, v in ref.items()}, {}, atol=0, rtol=0)
    assert out["tokens/token_agreement"]["value"] == 1.0
    assert "codebook_size" in out["tokens/tokens_out_of_range"]["skipped"]
    assert not any(k.startswith("recon/") for k in out)
