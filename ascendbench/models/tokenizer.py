"""A character-level tokenizer over printable ASCII built in memory; no vocabulary, no network.
>>> tok = build_tokenizer("transformers.PreTrainedTokenizerFast", model_max_length=8)
>>> tok("ab").input_ids
[98, 15, 1]"""

from __future__ import annotations

import string
from typing import Any

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

from ascendbench.models.base import import_class

WORD_START = "▁"


def unigram_vocab(specials: list[str]) -> list[tuple[str, float]]:
    """``(piece, log-probability)``: specials, ``▁``, printable ASCII, ``▁`` + each letter."""
    vocab = [(token, 0.0) for token in specials] + [(WORD_START, -2.0)]
    vocab += [(c, -3.0) for c in string.printable if not c.isspace()]
    return vocab + [(WORD_START + c, -2.5) for c in string.ascii_letters]


_SPEC = {"pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>", "bos_token": None,
         "append_eos": True, "prepend_bos": False, "padding_side": "right", "init_kwargs": None}


def build_tokenizer(class_path: str = "transformers.PreTrainedTokenizerFast",
                    model_max_length: int = 128, **spec: Any) -> Any:
    """A ``tokenizers``-backed ``class_path`` instance built in memory from ``spec``."""
    unknown = sorted(set(spec) - set(_SPEC))
    if unknown:
        raise TypeError(f"unknown tokenizer keys {unknown}; allowed: {', '.join(_SPEC)}")
    spec = {**_SPEC, **spec}
    named = {k: spec[k] for k in ("pad_token", "eos_token", "unk_token", "bos_token") if spec[k]}
    tokens = list(named.values())
    unk = tokens.index(named["unk_token"])
    backend = Tokenizer(models.Unigram(unigram_vocab(tokens), unk_id=unk, byte_fallback=False))
    backend.pre_tokenizer = pre_tokenizers.Metaspace(WORD_START, prepend_scheme="always")
    backend.decoder = decoders.Metaspace(WORD_START, prepend_scheme="always")
    head = [named["bos_token"]] if spec["prepend_bos"] and "bos_token" in named else []
    tail = [named["eos_token"]] if spec["append_eos"] and "eos_token" in named else []
    if head or tail:
        backend.post_processor = processors.TemplateProcessing(
            single=[*head, "$A", *tail], pair=[*head, "$A", *tail, "$B", *tail],
            special_tokens=[(t, tokens.index(t)) for t in head + tail])
    return import_class(class_path)(
        tokenizer_object=backend, model_max_length=int(model_max_length),
        padding_side=spec["padding_side"], **named, **dict(spec["init_kwargs"] or {}))
