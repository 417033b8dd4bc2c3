"""Pipeline components from their architecture config, and the in-memory tokenizer."""

from __future__ import annotations

import pytest
import torch

from ascendbench.errors import ConfigError
from ascendbench.models.pipeline import build_component, build_components, count_component_params
from ascendbench.models.tokenizer import build_tokenizer, unigram_vocab

TINY_SPECS = {
    "transformer": {"kind": "diffusers", "class_path": "diffusers.LTXVideoTransformer3DModel",
                    "config": {"in_channels": 8, "out_channels": 8, "num_attention_heads": 2,
                               "attention_head_dim": 8, "cross_attention_dim": 16,
                               "num_layers": 1, "caption_channels": 16}},
    "text_encoder": {"kind": "transformers", "class_path": "transformers.T5EncoderModel",
                     "config_class": "transformers.T5Config",
                     "config": {"vocab_size": 160, "d_model": 16, "d_kv": 8, "d_ff": 32,
                                "num_layers": 1, "num_heads": 2}},
    "scheduler": {"kind": "diffusers", "class_path": "diffusers.FlowMatchEulerDiscreteScheduler",
                  "config": {}},
    "tokenizer": {"kind": "tokenizer", "class_path": "transformers.T5Tokenizer",
                  "model_max_length": 32, "init_kwargs": {"extra_ids": 0}},
}


def test_components_are_seeded_and_independent_of_the_global_rng():
    torch.manual_seed(123)
    before = torch.rand(1)
    a = build_components(TINY_SPECS, seed=7)
    b = build_components(TINY_SPECS, seed=7)
    c = build_component("transformer", TINY_SPECS["transformer"], seed=8)
    for name in ("transformer", "text_encoder"):
        sa, sb = a[name].state_dict(), b[name].state_dict()
        assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(a["transformer"].proj_in.weight, c.proj_in.weight)
    torch.manual_seed(123)
    assert torch.equal(torch.rand(1), before), "the global RNG is restored"
    assert type(a["tokenizer"]).__name__ == "T5Tokenizer" and not a["transformer"].training


def test_meta_counts_match_the_built_components():
    counts = count_component_params(TINY_SPECS)
    built = build_components(TINY_SPECS, seed=0)
    assert set(counts) == {"transformer", "text_encoder"}, "scheduler and tokenizer hold no tensors"
    for name, count in counts.items():
        module = built[name]
        tensors = [*module.parameters(), *module.buffers()]
        assert count == sum(t.numel() for t in tensors)


@pytest.mark.parametrize("spec, match", [
    ({"kind": "onnx", "class_path": "x.Y"},
     r"components.bad.kind='onnx' is not a known component kind"),
    ({"kind": "transformers", "class_path": "transformers.T5EncoderModel"}, r"lacks config_class"),
])
def test_bad_component_specs_name_the_key(spec, match):
    with pytest.raises(ConfigError, match=match):
        build_component("bad", spec, seed=0)


def test_in_memory_tokenizer_is_deterministic_and_round_trips(tmp_path):
    from transformers import T5Tokenizer

    tok = build_tokenizer("transformers.T5Tokenizer", model_max_length=16,
                          init_kwargs={"extra_ids": 0})
    ids = tok("A serene mountain, 42!").input_ids
    assert ids[-1] == tok.eos_token_id == 1
    assert max(ids) < len(tok) == len(unigram_vocab(["<pad>", "</s>", "<unk>"]))
    assert tok.decode(ids, skip_special_tokens=True) == "A serene mountain, 42!"
    tok.save_pretrained(tmp_path)
    assert T5Tokenizer.from_pretrained(tmp_path)("A serene mountain, 42!").input_ids == ids


def test_gemma_style_tokenizer_prepends_bos_and_pads_left():
    tok = build_tokenizer("transformers.GemmaTokenizer", pad_token="<pad>", eos_token="<eos>",
                          unk_token="<unk>", bos_token="<bos>", append_eos=False,
                          prepend_bos=True, padding_side="left")
    ids = tok("a robot", padding="max_length",
              max_length=10).input_ids  # <bos> ▁a ▁r o b o t: 7 tokens
    assert ids[:4] == [tok.pad_token_id] * 3 + [tok.bos_token_id] and ids[-1] != tok.eos_token_id
