"""The video tokenizer's gates ``metrics["gate/<name>"]``, judged by ``model.thresholds``."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch

from ascendbench.errors import TaskError
from ascendbench.metrics.evaluators import token_metrics
from ascendbench.metrics.functional.regression import psnr_db
from ascendbench.models.videoflextok import read_path
from ascendbench.tasks.checks import CheckContext, compare_runs, gate

PSNR_RANGE = 2.0
QUALITY_GATES = ("gate/token_unique_ratio", "gate/recon_psnr_db")  # not judged for random weights


def _copy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copy(item) for item in value)
    return value


class Replay:
    """Record what ``owner.<method>`` returns in a pass, then return copies of it in the next."""

    def __init__(self, owner: Any, method: str) -> None:
        found = getattr(owner, method, None)
        if not callable(found) or isinstance(found, torch.nn.Module):
            raise TaskError(f"{type(owner).__name__} has no method {method!r} to replay; fix "
                            "model.task.latent_method (or set model.task.latent_module: null).")
        self.owner, self.method = owner, method
        self.recorded: list[Any] = []

    @contextmanager
    def _installed(self, wrapper: Callable[..., Any]) -> Iterator[None]:
        own = vars(self.owner)
        had, before = self.method in own, own.get(self.method)
        setattr(self.owner, self.method, wrapper)
        try:
            yield
        finally:
            if had:
                setattr(self.owner, self.method, before)
            else:
                delattr(self.owner, self.method)

    @contextmanager
    def recording(self) -> Iterator[None]:
        """Call the method as usual and keep a copy of each return value, in call order."""
        original, self.recorded = getattr(self.owner, self.method), []

        def record(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            self.recorded.append(_copy(result))
            return result

        with self._installed(record):
            yield

    @contextmanager
    def replaying(self) -> Iterator[None]:
        """Return the recorded values again, in the same order."""
        pending = list(self.recorded)

        def replay(*args: Any, **kwargs: Any) -> Any:
            if not pending:
                raise TaskError(f"{type(self.owner).__name__}.{self.method} was called more often "
                                f"than while recording ({len(self.recorded)} call(s)); the "
                                "replayed pass is not the same pass.")
            value = _copy(pending.pop(0))
            if isinstance(value, dict) and args and isinstance(args[0], dict):
                args[0].update(value)
                return args[0]
            return value

        with self._installed(replay):
            yield


def reconstruction_mse(reconstruction: torch.Tensor, video: torch.Tensor) -> float:
    """MSE of the reconstruction against the input clip in float64 (NaN when shapes differ).
    >>> reconstruction_mse(torch.zeros(1, 3, 1, 2, 2), torch.full((1, 3, 1, 2, 2), 0.5))
    0.25"""
    if reconstruction.shape != video.shape:
        return float("nan")
    diff = reconstruction.detach().cpu().double() - video.detach().cpu().double()
    return float((diff**2).mean())


def reconstruction_psnr(reconstruction: torch.Tensor, video: torch.Tensor) -> float:
    """PSNR in dB of the reconstruction against the input clip (both in ``[-1, 1]``)."""
    return psnr_db(reconstruction_mse(reconstruction, video), PSNR_RANGE, 200.0)


def tokenizer_gates(task: Any, ctx: CheckContext) -> dict[str, dict[str, Any]]:
    """Every gate of one device run; random-init weights: quality gates recorded, not judged."""
    weights, rules, video = ctx.weights, ctx.rules, ctx.inputs["video"]
    gates = {**_load_gates(ctx), **_token_gates(task, ctx), **fixed_latent_gate(task, ctx)}
    recon = ctx.outputs["reconstruction"]
    gates["gate/recon_psnr_db"] = gate("gate/recon_psnr_db", reconstruction_psnr(recon, video),
                                       rules, {"against": "input clip", "data_range": PSNR_RANGE})
    gates["gate/recon_mse"] = gate("gate/recon_mse", reconstruction_mse(recon, video), rules,
                                   {"against": "input clip"})
    outside = float((recon.detach().to("cpu").float().abs() > 1.0 + 1e-6).double().mean())
    gates["gate/recon_out_of_range"] = gate("gate/recon_out_of_range", outside, rules,
                                            {"min": float(recon.min()), "max": float(recon.max())})
    gates.update(rerun_psnr_gate(task, ctx))
    gates.update(_control_gates(task, ctx, gates["gate/recon_psnr_db"]["value"]))
    for name in () if weights.get("kind") == "loaded" else QUALITY_GATES:
        gates[name].update(verdict=None, threshold=None, rule=None,
                           not_judged="random-init weights")
    return gates


def _load_gates(ctx: CheckContext) -> dict[str, dict[str, Any]]:
    weights, out = ctx.weights, {}
    strict = weights.get("strict_load")
    for key, name in (("missing", "gate/load_missing_keys"),
                      ("unexpected", "gate/load_unexpected_keys")):
        if weights.get("kind") != "loaded":
            out[name] = {"skipped": f"weights are {weights.get('kind')}: nothing was loaded"}
        elif not strict:
            out[name] = {"skipped": "the loader recorded no strict-load counts"}
        else:
            out[name] = gate(name, len(strict[key]), ctx.rules, {
                "tensors_in_file": strict.get("tensors_in_file"), "first": strict[key][:10]})
    config = weights.get("config_checks")
    out["gate/config_mismatches"] = (
        gate("gate/config_mismatches", config["mismatches"], ctx.rules, config["checks"]) if config
        else {"skipped": "no config values to check (model.loader.expect)"})
    return out


def _token_gates(task: Any, ctx: CheckContext) -> dict[str, dict[str, Any]]:
    tokens, video, rules = ctx.outputs["tokens"], ctx.inputs["video"], ctx.rules
    expected = task.token_shape(int(video.shape[0]), int(video.shape[2]))
    again = task.tokenize(ctx.module, ctx.to_device({"video": video})["video"]).to("cpu")
    stats = token_metrics(again, tokens, task.codebook_size)
    total, agreement = stats["tokens_numel"], stats["token_agreement"]
    return {
        "gate/token_shape_match": gate("gate/token_shape_match",
                                       float(list(tokens.shape) == expected), rules,
                                       {"expected": expected, "actual": list(tokens.shape)}),
        "gate/token_ids_out_of_range": gate(
            "gate/token_ids_out_of_range", stats["tokens_out_of_range"], rules,
            {"min_id": float(tokens.min()), "max_id": float(tokens.max()),
             "codebook_size": task.codebook_size}),
        "gate/token_unique_ratio": gate("gate/token_unique_ratio", stats["tokens_unique"] / total,
                                        rules, {"unique": stats["tokens_unique"], "total": total}),
        "gate/rerun_token_agreement": gate("gate/rerun_token_agreement", agreement, rules, {
            "equal": round(agreement * total), "total": total, "bit_exact": agreement == 1.0}),
    }


def _control_gates(task: Any, ctx: CheckContext, psnr: float) -> dict[str, dict[str, Any]]:
    names = ("gate/control_psnr_db", "gate/control_psnr_gap_db")
    if ctx.weights.get("kind") != "loaded":
        return dict.fromkeys(names, {"skipped": "the model itself is random-init; the control "
                                                "compares loaded weights with random ones"})
    if ctx.control is None:
        return dict.fromkeys(names, {"skipped": "the loader cannot build a random-init control"})
    with ctx.control() as twin:
        twin.to(device=ctx.device, dtype=ctx.dtype)
        outputs = task.run(twin, ctx.to_device(ctx.inputs))
        control = reconstruction_psnr(outputs["reconstruction"], ctx.inputs["video"])
        details = {"control_tokens_min_id": float(outputs["tokens"].min()),
                   "control_tokens_max_id": float(outputs["tokens"].max()),
                   "control_unique": float(outputs["tokens"].unique().numel()),
                   "loaded_psnr_db": psnr,
                   "control_mse": reconstruction_mse(outputs["reconstruction"],
                                                     ctx.inputs["video"])}
        del twin, outputs
    gc.collect()
    return {names[0]: gate(names[0], control, ctx.rules, details),
            names[1]: gate(names[1], psnr - control, ctx.rules, details)}


def fixed_latent_gate(task: Any, ctx: CheckContext) -> dict[str, dict[str, Any]]:
    """``gate/fixed_latent_token_agreement``: two tokenizes, the second on the first's latents."""
    name = "gate/fixed_latent_token_agreement"
    if not task.latent_module:
        return {name: {"skipped": "model.task.latent_module is not set (the attribute path of the "
                                  "model's VAE)"}}
    try:
        owner = read_path(ctx.module, task.latent_module)
    except KeyError as exc:
        raise TaskError(f"model.task.latent_module={task.latent_module}: {exc.args[0]} on "
                        f"{type(ctx.module).__name__}; fix the attribute path or set it to "
                        "null.") from exc
    replay = Replay(owner, task.latent_method)
    video = ctx.to_device({"video": ctx.inputs["video"]})["video"]
    with replay.recording():
        first = task.tokenize(ctx.module, video).to("cpu")
    with replay.replaying():
        second = task.tokenize(ctx.module, video).to("cpu")
    agreement = token_metrics(first, second, None)["token_agreement"]
    return {name: gate(name, agreement, ctx.rules, {
        "equal": round(agreement * first.numel()), "total": first.numel(),
        "bit_exact": agreement == 1.0, "latents_from": f"{task.latent_module}.{task.latent_method}",
        "latent_calls": len(replay.recorded)})}


def rerun_psnr_gate(task: Any, ctx: CheckContext) -> dict[str, dict[str, Any]]:
    """``gate/recon_psnr_rerun_diff_db``: the run's tokens detokenized again; the PSNR's shift."""
    name, video = "gate/recon_psnr_rerun_diff_db", ctx.inputs["video"]
    recon = ctx.outputs["reconstruction"]
    noise = {"noise": ctx.inputs["noise"]} if "noise" in ctx.inputs else {}
    moved = ctx.to_device({"tokens": ctx.outputs["tokens"], **noise})
    again = task.reconstruct(ctx.module, moved["tokens"], moved.get("noise")).to("cpu")
    first, second = reconstruction_psnr(recon, video), reconstruction_psnr(again, video)
    diff, same = compare_runs(recon.float(), again.float())
    return {name: gate(name, abs(first - second), ctx.rules, {
        "psnr_db": first, "rerun_psnr_db": second, "max_abs_diff": diff, **same})}
