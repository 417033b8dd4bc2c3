"""A tokenizer built in memory with the ``tokenizers`` library: no vocabulary file, no network.

Tiny twins and random-init runs of text-conditioned pipelines need a tokenizer whose ids stay inside
the text encoder's embedding table. :func:`build_tokenizer` makes a character-level Unigram model
(SentencePiece style: ``▁`` marks a word start) over printable ASCII, wraps it in the pipeline's own
transformers tokenizer class (a fast, ``tokenizers``-backed class) and saves and loads like any other.
Its ids are deterministic: the vocabulary is fixed by :func:`unigram_vocab`.

>>> tok = build_tokenizer("transformers.PreTrainedTokenizerFast", model_max_length=8)
>>> tok("ab").input_ids
[98, 15, 1]
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any, Mapping

from ascendbench.models.loader import import_class

WORD_START = "▁"


def unigram_vocab(specials: list[str]) -> list[tuple[str, float]]:
    """Vocabulary ``(piece, log-probability)``: the specials, ``▁``, every printable ASCII character,
    then ``▁`` + each letter (so a word's first letter costs one token, not two)."""
    characters = [c for c in string.printable if not c.isspace()]
    vocab = [(token, 0.0) for token in specials] + [(WORD_START, -2.0)]
    vocab += [(c, -3.0) for c in characters]
    vocab += [(WORD_START + c, -2.5) for c in string.ascii_letters]
    return vocab


def backend_tokenizer(specials: list[str], unk_token: str, eos_token: str | None = None,
                      bos_token: str | None = None) -> Any:
    """The ``tokenizers.Tokenizer``: Unigram over :func:`unigram_vocab`, Metaspace, optional BOS/EOS."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    vocab = unigram_vocab(specials)
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=specials.index(unk_token), byte_fallback=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement=WORD_START, prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement=WORD_START, prepend_scheme="always")
    head, tail = [t for t in (bos_token,) if t], [t for t in (eos_token,) if t]
    if head or tail:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=[*head, "$A", *tail], pair=[*head, "$A", *tail, "$B", *tail],
            special_tokens=[(t, specials.index(t)) for t in head + tail])
    return tokenizer


@dataclass(frozen=True)
class TokenizerSpec:
    """An in-memory tokenizer: the keys of a ``kind: tokenizer`` component in ``model.loader.components``.

    Attributes:
        class_path: the pipeline's tokenizer class, e.g. ``transformers.T5Tokenizer``.
        model_max_length: longest sequence the tokenizer reports (pipelines pad to it).
        pad_token, eos_token, unk_token, bos_token: special tokens, in that id order from 0.
        append_eos: end every sequence with ``eos_token`` (T5 style).
        prepend_bos: start every sequence with ``bos_token`` (Gemma style).
        padding_side: ``right`` (T5) or ``left`` (decoder-only text encoders such as Gemma).
        init_kwargs: further constructor arguments of the class (e.g. ``extra_ids: 0`` for T5).
    """

    class_path: str = "transformers.PreTrainedTokenizerFast"
    model_max_length: int = 128
    pad_token: str = "<pad>"
    eos_token: str | None = "</s>"
    unk_token: str = "<unk>"
    bos_token: str | None = None
    append_eos: bool = True
    prepend_bos: bool = False
    padding_side: str = "right"
    init_kwargs: Mapping[str, Any] | None = None

    def build(self) -> Any:
        """The tokenizer: an instance of ``class_path`` around :func:`backend_tokenizer`."""
        specials = [t for t in (self.pad_token, self.eos_token, self.unk_token, self.bos_token) if t is not None]
        backend = backend_tokenizer(specials, self.unk_token, self.eos_token if self.append_eos else None,
                                    self.bos_token if self.prepend_bos else None)
        cls = import_class(self.class_path)
        named = {"pad_token": self.pad_token, "eos_token": self.eos_token, "unk_token": self.unk_token,
                 "bos_token": self.bos_token}
        return cls(tokenizer_object=backend, model_max_length=int(self.model_max_length),
                   padding_side=self.padding_side, **{k: v for k, v in named.items() if v is not None},
                   **dict(self.init_kwargs or {}))


def build_tokenizer(class_path: str = TokenizerSpec.class_path, **spec: Any) -> Any:
    """An in-memory tokenizer of class ``class_path`` (any ``tokenizers``-backed transformers class).

    Args:
        class_path: the pipeline's tokenizer class, e.g. ``transformers.T5Tokenizer``.
        **spec: the other fields of :class:`TokenizerSpec` (a config's component spec as it stands);
            an unknown key is a ``TypeError``.
    """
    return TokenizerSpec(class_path, **spec).build()
