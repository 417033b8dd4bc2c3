"""Pure metrics of discrete token tensors (video tokenizers, FSQ / VQ codebooks)."""

from __future__ import annotations

import torch


def token_metrics(reference: torch.Tensor, device: torch.Tensor, codebook_size: int | None) -> dict[str, float]:
    """Agreement of two token tensors, ids outside the codebook and id diversity.

    Args:
        reference: token ids of the reference run.
        device: token ids of the device run (same shape).
        codebook_size: ids must lie in ``[0, codebook_size)``; ``None`` skips the range check.

    Returns:
        ``token_agreement`` (share of equal ids), ``tokens_out_of_range`` (device ids outside the
        codebook; absent without ``codebook_size``), ``tokens_unique`` and ``tokens_unique_reference``
        (distinct ids), ``tokens_numel``.

    >>> token_metrics(torch.tensor([1, 2, 3, 4]), torch.tensor([1, 2, 3, 9]), codebook_size=8)["token_agreement"]
    0.75
    """
    ref, dev = reference.detach().to("cpu").reshape(-1), device.detach().to("cpu").reshape(-1)
    values = {
        "token_agreement": float((ref == dev).double().mean()) if ref.numel() else 1.0,
        "tokens_unique": float(torch.unique(dev).numel()),
        "tokens_unique_reference": float(torch.unique(ref).numel()),
        "tokens_numel": float(ref.numel()),
    }
    if codebook_size is not None:
        values["tokens_out_of_range"] = float(((dev < 0) | (dev >= int(codebook_size))).sum())
    return values
