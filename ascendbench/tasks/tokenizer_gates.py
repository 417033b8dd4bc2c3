"""The video tokenizer's gates, as the VideoFlexTok seed report checked them by hand.

All are recorded under ``metrics`` as ``gate/<name>``; verdicts come from the rule ``<name>`` in
``model.thresholds`` (e.g. ``recon_psnr_db: {min: 20}``):

* ``gate/load_missing_keys``, ``gate/load_unexpected_keys`` -- strict load of the checkpoint;
* ``gate/config_mismatches`` -- config values that did not land in the instance (details per value);
* ``gate/token_shape_match`` -- 1 when the tokens have the expected shape;
* ``gate/token_ids_out_of_range`` -- ids outside ``[0, codebook_size)`` (details: min, max);
* ``gate/token_unique_ratio`` -- distinct ids / tokens (a dead encoder emits one id);
* ``gate/rerun_token_agreement`` -- fraction of equal ids between the run and a second tokenize;
* ``gate/fixed_latent_token_agreement`` -- the same with the VAE's latents of the first tokenize replayed
  into the second (``model.task.latent_module``): the encoder + FSQ alone, on fixed latents;
* ``gate/recon_psnr_db`` -- reconstruction PSNR against the input clip (range 2, values in [-1, 1]);
* ``gate/recon_mse`` -- the reconstruction's mean squared error against the input clip (informative);
* ``gate/recon_psnr_rerun_diff_db`` -- how far the PSNR of a second detokenize of the same tokens from the
  same noise lies from the run's (0 when the reconstruction is reproducible);
* ``gate/recon_out_of_range`` -- fraction of reconstructed values outside ``[-1, 1]``;
* ``gate/control_psnr_db`` and ``gate/control_psnr_gap_db`` -- the same architecture randomly
  initialised, and how far the loaded weights beat it.
"""

from __future__ import annotations

import gc
from typing import Any

import torch

from ascendbench.errors import TaskError
from ascendbench.metrics.functional.regression import psnr_db
from ascendbench.models.expect import read_path
from ascendbench.tasks.checks import CheckContext, compare_runs, gate, skipped
from ascendbench.tasks.replay import Replay

PSNR_RANGE = 2.0
QUALITY_GATES = ("gate/token_unique_ratio", "gate/recon_psnr_db")
PSNR_CAP_DB = 200.0


def token_stats(tokens: torch.Tensor, codebook_size: int) -> dict[str, float]:
    """Id range, ids outside the codebook, distinct ids and their ratio.

    >>> token_stats(torch.tensor([[0, 5, 5, 9]]), codebook_size=8)["out_of_range"]
    1.0
    """
    flat = tokens.detach().to("cpu").reshape(-1).long()
    unique = int(flat.unique().numel())
    return {
        "min_id": float(flat.min()), "max_id": float(flat.max()),
        "out_of_range": float(((flat < 0) | (flat >= codebook_size)).sum()),
        "unique": float(unique), "total": float(flat.numel()),
        "unique_ratio": unique / max(1, flat.numel()),
    }


def token_agreement(first: torch.Tensor, second: torch.Tensor) -> float:
    """Fraction of positions with equal ids (0.0 when the shapes differ).

    >>> token_agreement(torch.tensor([1, 2, 3, 4]), torch.tensor([1, 2, 0, 4]))
    0.75
    """
    if first.shape != second.shape:
        return 0.0
    return float((first.to("cpu") == second.to("cpu")).double().mean())


def reconstruction_mse(reconstruction: torch.Tensor, video: torch.Tensor) -> float:
    """Mean squared error of the reconstruction against the input clip, in float64 (NaN when shapes differ).

    >>> reconstruction_mse(torch.zeros(1, 3, 1, 2, 2), torch.full((1, 3, 1, 2, 2), 0.5))
    0.25
    """
    if reconstruction.shape != video.shape:
        return float("nan")
    diff = reconstruction.detach().to("cpu", torch.float64) - video.detach().to("cpu", torch.float64)
    return float((diff**2).mean())


def reconstruction_psnr(reconstruction: torch.Tensor, video: torch.Tensor) -> float:
    """PSNR in dB of the reconstruction against the input clip (both in ``[-1, 1]``)."""
    mse = reconstruction_mse(reconstruction, video)
    return float("nan") if mse != mse else psnr_db(mse, PSNR_RANGE, PSNR_CAP_DB)


def tokenizer_gates(task: Any, ctx: CheckContext) -> dict[str, dict[str, Any]]:
    """All gates of :mod:`this module <ascendbench.tasks.tokenizer_gates>` for one device run.

    With random-init weights the quality gates (:data:`QUALITY_GATES`) are recorded but not judged:
    random weights are not expected to reconstruct.
    """
    loaded = ctx.weights.get("kind") == "loaded"
    gates: dict[str, dict[str, Any]] = {}
    gates.update(_load_gates(ctx))
    gates.update(_token_gates(task, ctx))
    gates.update(fixed_latent_gate(task, ctx))
    gates.update(_reconstruction_gates(ctx))
    gates.update(rerun_psnr_gate(task, ctx))
    gates.update(_control_gates(task, ctx, gates["gate/recon_psnr_db"]["value"]))
    for name in () if loaded else QUALITY_GATES:
        gates[name].update(verdict=None, threshold=None, rule=None, not_judged="random-init weights")
    return gates


def _load_gates(ctx: CheckContext) -> dict[str, dict[str, Any]]:
    weights, rules = ctx.weights, ctx.rules
    out: dict[str, dict[str, Any]] = {}
    strict = weights.get("strict_load")
    if weights.get("kind") != "loaded":
        reason = f"weights are {weights.get('kind')}: nothing was loaded"
        out["gate/load_missing_keys"] = out["gate/load_unexpected_keys"] = skipped(reason)
    elif not strict:
        reason = "the loader recorded no strict-load counts"
        out["gate/load_missing_keys"] = out["gate/load_unexpected_keys"] = skipped(reason)
    else:
        detail = {"tensors_in_file": strict.get("tensors_in_file")}
        out["gate/load_missing_keys"] = gate("gate/load_missing_keys", len(strict["missing"]), rules,
                                             {**detail, "first": strict["missing"][:10]})
        out["gate/load_unexpected_keys"] = gate("gate/load_unexpected_keys", len(strict["unexpected"]), rules,
                                                {**detail, "first": strict["unexpected"][:10]})
    config = weights.get("config_checks")
    out["gate/config_mismatches"] = (gate("gate/config_mismatches", config["mismatches"], rules, config["checks"])
                                     if config else skipped("no config values to check (model.loader.expect)"))
    return out


def _token_gates(task: Any, ctx: CheckContext) -> dict[str, dict[str, Any]]:
    tokens, video, rules = ctx.outputs["tokens"], ctx.inputs["video"], ctx.rules
    expected = task.token_shape(int(video.shape[0]), int(video.shape[2]))
    stats = token_stats(tokens, task.codebook_size)
    again = task.tokenize(ctx.module, ctx.to_device({"video": video})["video"]).to("cpu")
    agreement = token_agreement(tokens, again)
    return {
        "gate/token_shape_match": gate("gate/token_shape_match", float(list(tokens.shape) == expected), rules,
                                       {"expected": expected, "actual": list(tokens.shape)}),
        "gate/token_ids_out_of_range": gate("gate/token_ids_out_of_range", stats["out_of_range"], rules,
                                            {"min_id": stats["min_id"], "max_id": stats["max_id"],
                                             "codebook_size": task.codebook_size}),
        "gate/token_unique_ratio": gate("gate/token_unique_ratio", stats["unique_ratio"], rules,
                                        {"unique": stats["unique"], "total": stats["total"]}),
        "gate/rerun_token_agreement": gate("gate/rerun_token_agreement", agreement, rules,
                                     {"equal": round(agreement * stats["total"]), "total": stats["total"],
                                      "bit_exact": bool(agreement == 1.0)}),
    }


def _reconstruction_gates(ctx: CheckContext) -> dict[str, dict[str, Any]]:
    recon, video, rules = ctx.outputs["reconstruction"], ctx.inputs["video"], ctx.rules
    outside = float((recon.detach().to("cpu").float().abs() > 1.0 + 1e-6).double().mean())
    return {
        "gate/recon_psnr_db": gate("gate/recon_psnr_db", reconstruction_psnr(recon, video), rules,
                                   {"against": "input clip", "data_range": PSNR_RANGE}),
        "gate/recon_mse": gate("gate/recon_mse", reconstruction_mse(recon, video), rules, {"against": "input clip"}),
        "gate/recon_out_of_range": gate("gate/recon_out_of_range", outside, rules,
                                        {"min": float(recon.min()), "max": float(recon.max())}),
    }


def _control_gates(task: Any, ctx: CheckContext, psnr: float) -> dict[str, dict[str, Any]]:
    names = ("gate/control_psnr_db", "gate/control_psnr_gap_db")
    if ctx.weights.get("kind") != "loaded":
        return dict.fromkeys(names, skipped("the model itself is random-init; the control compares "
                                            "loaded weights with random ones"))
    if ctx.control is None:
        return dict.fromkeys(names, skipped("the loader cannot build a random-init control"))
    with ctx.control() as twin:
        twin.to(device=ctx.device, dtype=ctx.dtype)
        outputs = task.run(twin, ctx.to_device(ctx.inputs))
        control_psnr = reconstruction_psnr(outputs["reconstruction"], ctx.inputs["video"])
        control_mse = reconstruction_mse(outputs["reconstruction"], ctx.inputs["video"])
        stats = token_stats(outputs["tokens"], task.codebook_size)
        del twin, outputs
    gc.collect()
    details = {"control_tokens_min_id": stats["min_id"], "control_tokens_max_id": stats["max_id"],
               "control_unique": stats["unique"], "loaded_psnr_db": psnr, "control_mse": control_mse}
    return {
        names[0]: gate(names[0], control_psnr, ctx.rules, details),
        names[1]: gate(names[1], psnr - control_psnr, ctx.rules, details),
    }



def fixed_latent_gate(task: Any, ctx: CheckContext) -> dict[str, dict[str, Any]]:
    """``gate/fixed_latent_token_agreement``: two tokenizes whose VAE latents are the same tensors.

    The first tokenize records what ``<latent_module>.<latent_method>`` returns, the second gets those
    values back (:class:`~ascendbench.tasks.replay.Replay`), so any id that differs comes from the encoder
    or the quantiser, not from the VAE (whose 3D convolutions are not bit-deterministic on Ascend).
    """
    name = "gate/fixed_latent_token_agreement"
    if not task.latent_module:
        return {name: skipped("model.task.latent_module is not set (the attribute path of the model's VAE)")}
    try:
        owner = read_path(ctx.module, task.latent_module)
    except KeyError as exc:
        raise TaskError(f"model.task.latent_module={task.latent_module}: {exc.args[0]} on "
                        f"{type(ctx.module).__name__}; fix the attribute path or set it to null.") from exc
    replay = Replay(owner, task.latent_method)
    video = ctx.to_device({"video": ctx.inputs["video"]})["video"]
    with replay.recording():
        first = task.tokenize(ctx.module, video).to("cpu")
    with replay.replaying():
        second = task.tokenize(ctx.module, video).to("cpu")
    agreement = token_agreement(first, second)
    return {name: gate(name, agreement, ctx.rules, {
        "equal": round(agreement * first.numel()), "total": first.numel(), "bit_exact": bool(agreement == 1.0),
        "latents_from": f"{task.latent_module}.{task.latent_method}", "latent_calls": len(replay.recorded)})}


def rerun_psnr_gate(task: Any, ctx: CheckContext) -> dict[str, dict[str, Any]]:
    """``gate/recon_psnr_rerun_diff_db``: the run's tokens detokenized again from the same noise; how far
    that reconstruction's PSNR lies from the run's, with both PSNRs and the largest pixel difference."""
    name, video = "gate/recon_psnr_rerun_diff_db", ctx.inputs["video"]
    moved = ctx.to_device({"tokens": ctx.outputs["tokens"], **({"noise": ctx.inputs["noise"]}
                                                                 if "noise" in ctx.inputs else {})})
    again = task.reconstruct(ctx.module, moved["tokens"], moved.get("noise")).to("cpu")
    first_psnr = reconstruction_psnr(ctx.outputs["reconstruction"], video)
    second_psnr = reconstruction_psnr(again, video)
    diff, same = compare_runs(ctx.outputs["reconstruction"].float(), again.float())
    return {name: gate(name, abs(first_psnr - second_psnr), ctx.rules, {
        "psnr_db": first_psnr, "rerun_psnr_db": second_psnr, "max_abs_diff": diff, **same})}
