"""What a multi-card job asks for and the parallel modes installed on a rank's model."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import diffusers
import torch
import torch.distributed as dist
from torch import nn

from ascendbench.errors import ConfigError, TaskError
from ascendbench.models.memory import RunMemory

BACKENDS: dict[str, str] = {"cpu": "gloo", "cuda": "nccl", "npu": "hccl"}
# The parallel modes and what each does with the ranks (docs/devices.md "Several cards").
MODES: dict[str, str] = {
    "none": "one rank (world_size 1)",
    "cfg": "classifier-free guidance split over 2 ranks: rank 0 the conditional branch, rank 1 the "
           "unconditional; the denoiser's noise predictions are all-gathered every step",
    "device_map": "the model's largest block list placed over the ranks in contiguous slices; each "
                  "block runs on the rank that holds it and its output is broadcast to the others",
    "context": "diffusers context parallelism (ModelMixin.enable_parallelism with "
               "ContextParallelConfig): the sequence split over the ranks, ring attention",
}


@dataclass(frozen=True)
class ParallelSettings:
    """A job's ranks: count, mode (a key of :data:`MODES`), backend, rendezvous, timeouts."""

    world_size: int = 1
    mode: str = "none"
    backend: str = "gloo"
    master_addr: str = "127.0.0.1"
    master_port: int = 0
    timeout_s: float = 300.0
    grace_s: float = 5.0

    @property
    def multi(self) -> bool:
        """True when the job runs as several ranks."""
        return self.world_size > 1

    def to_dict(self) -> dict[str, Any]:
        """The record's ``distributed`` head: world size, backend, mode."""
        return {"world_size": self.world_size, "mode": self.mode, "backend": self.backend,
                "mode_means": MODES[self.mode]}


def _int(value: Any, key: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}={value!r} must be an integer, e.g. `{key}=2`.") from None


def _refusal(world_size: int, mode: str) -> str | None:
    if world_size < 1:
        return (f"device.world_size={world_size} must be >= 1 (1: one card; N: N ranks, one card "
                "each). Fix the override, e.g. `device.world_size=2 device.parallel=cfg`.")
    if mode not in MODES:
        return (f"device.parallel={mode!r} is not a parallel mode; allowed: {', '.join(MODES)} "
                "(none needs device.world_size=1). Fix the override, e.g. `device.parallel=cfg`.")
    if world_size == 1 and mode != "none":
        return (f"device.parallel={mode} needs several ranks but device.world_size=1. Set "
                "`device.world_size=2` (one card per rank), or `device.parallel=none`.")
    if world_size > 1 and mode == "none":
        allowed = ", ".join(m for m in MODES if m != "none")
        return (f"device.world_size={world_size} needs a parallel mode saying what the ranks "
                f"share; allowed: {allowed}, e.g. `device.parallel=cfg`.")
    if mode == "cfg" and world_size != 2:
        return ("device.parallel=cfg splits the two guidance branches (conditional, unconditional) "
                f"over exactly 2 ranks, but device.world_size={world_size}. Set "
                "`device.world_size=2`.")
    return None


def parallel_settings(device_cfg: Mapping[str, Any], device_type: str) -> ParallelSettings:
    """Read and check the device node's parallel keys for a run on ``device_type`` (ConfigError)."""
    world_size = _int(device_cfg.get("world_size", 1), "device.world_size")
    mode = str(device_cfg.get("parallel") or "none")
    dist = dict(device_cfg.get("dist") or {})
    if (why := _refusal(world_size, mode)) is not None:
        raise ConfigError(why)
    backend = str(dist.get("backend") or BACKENDS.get(device_type, "gloo"))
    if backend not in set(BACKENDS.values()):
        allowed = ", ".join(sorted(set(BACKENDS.values())))
        raise ConfigError(f"device.dist.backend={backend!r} is not a torch.distributed backend "
                          f"ascendbench drives; allowed: {allowed} (null: {BACKENDS} by device "
                          "type).")
    grace = dist.get("grace_s")
    return ParallelSettings(world_size=world_size, mode=mode, backend=backend,
                            master_addr=str(dist.get("master_addr") or "127.0.0.1"),
                            master_port=_int(dist.get("master_port") or 0,
                                             "device.dist.master_port"),
                            timeout_s=float(dist.get("timeout_s") or 300.0),
                            grace_s=float(grace if grace is not None else 5.0))


# The half of the guidance batch each rank computes (index of ``chunk(2)``): rank 0 the conditional,
# rank 1 the unconditional; the gather puts them back in the pipeline's order.
CFG_PART = {0: 1, 1: 0}
UNCONDITIONAL_RANK, CONDITIONAL_RANK = 1, 0
_DEVICE: dict[str, torch.device] = {"device": torch.device("cpu")}  # where collectives allocate


def set_rank_device(device: torch.device) -> None:
    """The device collectives of this rank allocate on (its card; the CPU under gloo)."""
    _DEVICE["device"] = device


def denoiser_of(model: Any) -> nn.Module:
    """The denoiser of a diffusers pipeline (``transformer``, else ``unet``), or a ConfigError."""
    for name in ("transformer", "unet"):
        if isinstance(module := getattr(model, name, None), nn.Module):
            return module
    raise ConfigError(f"device.parallel=cfg and context need a diffusion pipeline with a "
                      f"denoiser (transformer or unet); the model is a {type(model).__name__}. Use "
                      "it with a text/image-to-video model (e.g. `model=tiny_ltx_t2v`), or "
                      "`device.parallel=device_map`.")


@dataclass(eq=False)
class CfgSplit:
    """Classifier-free guidance over two ranks, as hooks on the denoiser; ``calls``: calls split."""

    rank: int
    pipe: Any
    calls: int = 0

    def install(self) -> CfgSplit:
        """Hook the pipeline's denoiser; returns self."""
        denoiser = denoiser_of(self.pipe)
        denoiser.register_forward_pre_hook(self._split, with_kwargs=True)
        denoiser.register_forward_hook(self._gather, with_kwargs=True)
        return self

    def _split(self, module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        first = kwargs.get("hidden_states", args[0] if args else None)
        if not isinstance(first, torch.Tensor):
            raise TaskError("device.parallel=cfg: the denoiser was called without a hidden_states "
                            "tensor to split.")
        batch = int(first.shape[0])
        if not getattr(self.pipe, "do_classifier_free_guidance", True) or batch % 2:
            scale = getattr(self.pipe, "guidance_scale", "?")
            raise ConfigError(
                f"device.parallel=cfg: the denoiser was called with a batch of {batch}, not the "
                f"two guidance branches (guidance_scale={scale}); the split needs classifier-free "
                "guidance on. Set `+model.task.call_kwargs.guidance_scale=3.0` (> 1), or run "
                "without device.parallel.")
        part = CFG_PART[self.rank]

        def take(value: Any) -> Any:  # this rank's half of every batch-sized tensor
            batched = isinstance(value, torch.Tensor) and value.dim() and value.shape[0] == batch
            return value.chunk(2)[part] if batched else value

        return tuple(take(a) for a in args), {k: take(v) for k, v in kwargs.items()}

    def _gather(self, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> Any:
        self.calls += 1
        if isinstance(output, torch.Tensor):
            return _gather_halves(output)
        if isinstance(output, (tuple, list)):
            return type(output)(_gather_halves(o) if isinstance(o, torch.Tensor) else o
                                for o in output)
        raise TaskError(f"device.parallel=cfg: the denoiser returned a {type(output).__name__}; "
                        "only tensors and tuples of tensors (return_dict=False) can be gathered.")


def _gather_halves(half: torch.Tensor) -> torch.Tensor:
    """Both ranks' halves of a prediction, in the pipeline's ``[unconditional, conditional]``."""
    parts = [torch.empty_like(half) for _ in range(2)]
    dist.all_gather(parts, half.contiguous())
    return torch.cat([parts[UNCONDITIONAL_RANK], parts[CONDITIONAL_RANK]])


def largest_block_list(model: Any) -> tuple[str, nn.ModuleList]:
    """``(dotted path, ModuleList)`` holding the most parameter bytes (ConfigError if none)."""
    roots = ({"": model} if isinstance(model, nn.Module)
             else {name: m for name, m in vars(model).items() if isinstance(m, nn.Module)})
    for name in ("transformer", "unet"):
        if name in roots and any(isinstance(sub, nn.ModuleList) and len(sub) >= 2
                                 for sub in roots[name].modules()):
            roots = {name: roots[name]}
            break
    best: tuple[int, str, nn.ModuleList] | None = None
    for root, module in roots.items():
        for name, sub in module.named_modules():
            if isinstance(sub, nn.ModuleList) and len(sub) >= 2:
                size = sum(p.numel() * p.element_size() for p in sub.parameters())
                if best is None or size > best[0]:
                    best = (size, ".".join(part for part in (root, name) if part), sub)
    if best is None:
        raise ConfigError(f"device.parallel=device_map places a block list (transformer_blocks, "
                          f"layers...) over the ranks, but {type(model).__name__} has no module "
                          "list of two or more blocks. Run it on one card (`device.world_size=1 "
                          "device.parallel=none`).")
    return best[1], best[2]


def slices(count: int, world_size: int) -> list[range]:
    """``count`` blocks cut into ``world_size`` contiguous slices, the first ones longer."""
    if count < world_size:
        raise ConfigError(f"device.parallel=device_map: {count} block(s) cannot be placed over "
                          f"device.world_size={world_size} ranks (each rank needs one). Use fewer "
                          "ranks.")
    size, extra = divmod(count, world_size)
    start = [r * size + min(r, extra) for r in range(world_size + 1)]  # the first `extra` longer
    return [range(start[r], start[r + 1]) for r in range(world_size)]


@dataclass(eq=False)
class BlockPlacement:
    """``device_map``: this rank holds ``slices(...)[rank]`` of the largest block list."""

    rank: int
    world_size: int
    path: str = ""
    owners: list[int] = field(default_factory=list)
    held_mb: float = 0.0

    def install(self, model: Any) -> BlockPlacement:
        """Free the blocks other ranks hold, route each block's output through its owner."""
        self.path, blocks = largest_block_list(model)
        cut = slices(len(blocks), self.world_size)
        self.owners = [rank for rank, part in enumerate(cut) for _ in part]
        for block, owner in zip(blocks, self.owners, strict=True):
            if owner != self.rank:  # empty tensors of the same dtype: the module still casts, moves
                for tensor in [*block.parameters(), *block.buffers()]:
                    tensor.data = torch.empty(0, dtype=tensor.dtype, device=tensor.device)
            block.forward = _routed(block.forward, owner, self.rank)
        self.held_mb = sum(t.numel() * t.element_size() for t in blocks.parameters()) / 2**20
        return self

    def to_dict(self) -> dict[str, Any]:
        """The record's placement: which rank holds which blocks of which list."""
        held = [[i for i, o in enumerate(self.owners) if o == r] for r in range(self.world_size)]
        return {"blocks": self.path, "count": len(self.owners), "held_block_mb": self.held_mb,
                "by_rank": {str(r): f"{self.path}[{h[0]}:{h[-1] + 1}]" for r, h in enumerate(held)
                            if h}}


def _routed(forward: Any, owner: int, rank: int) -> Any:
    """``forward`` run on ``owner`` only; its output broadcast to every rank."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return broadcast_output(forward(*args, **kwargs) if rank == owner else None, owner, rank)

    return call


def broadcast_output(output: Any, owner: int, rank: int) -> Any:
    """A block's output (a tensor, or a tuple/list of tensors and Nones) from ``owner`` to all."""
    layout: list[Any] = [None]
    if rank == owner:
        items = [output] if isinstance(output, torch.Tensor) else list(output)
        if not all(isinstance(t, torch.Tensor) or t is None for t in items):
            raise TaskError("device.parallel=device_map: a block returned something other than "
                            "tensors; only tensors and tuples of tensors go between ranks.")
        kind = "tensor" if isinstance(output, torch.Tensor) else type(output).__name__
        layout = [(kind, [None if t is None else (tuple(t.shape), str(t.dtype).split(".")[-1])
                          for t in items])]
    dist.broadcast_object_list(layout, src=owner, device=_DEVICE["device"])
    kind, specs = layout[0]
    received: list[Any] = []
    for index, spec in enumerate(specs):
        if spec is None:
            received.append(None)
            continue
        tensor = items[index].contiguous() if rank == owner else torch.empty(
            spec[0], dtype=getattr(torch, spec[1]), device=_DEVICE["device"])
        dist.broadcast(tensor, src=owner)
        received.append(tensor)
    if rank == owner:
        return output
    return received[0] if kind == "tensor" else (tuple(received) if kind == "tuple" else received)


def check_mode(settings: ParallelSettings, model: Any, device_type: str) -> None:
    """Refuse, before any rank starts, a mode the model or the device cannot run (ConfigError)."""
    if settings.mode == "cfg":
        denoiser_of(model)
    elif settings.mode == "device_map":
        largest_block_list(model)
    elif settings.mode == "context" and device_type == "cpu":
        raise ConfigError(
            f"device.parallel=context cannot run on cpu: diffusers {diffusers.__version__} builds "
            "its context-parallel device mesh on the accelerator torch was built for "
            "(ModelMixin._resolve_parallel_config: torch._C._get_accelerator(), device index rank "
            "% torch.accelerator.device_count()), so it has no CPU path under gloo. Run it on CUDA "
            "or NPU cards (`device=cuda device.world_size=2`), or use `device.parallel=cfg` or "
            "`device_map` here.")


def enable_context_parallel(model: Any, settings: ParallelSettings) -> dict[str, Any]:
    """``enable_parallelism(ContextParallelConfig(ring_degree=world_size))`` on the denoiser (the
    parent's :func:`check_mode` refused the CPU before any rank started)."""
    denoiser = denoiser_of(model)
    config = diffusers.ContextParallelConfig(ring_degree=settings.world_size)
    denoiser.enable_parallelism(config=config)
    return {"denoiser": type(denoiser).__name__, "ring_degree": settings.world_size}


def rank_memory(settings: ParallelSettings, model: Any, single: RunMemory) -> list[RunMemory]:
    """Each rank's parameters and activation peak from the one-card estimate, rank 0 first."""
    if settings.mode == "device_map":
        _, blocks = largest_block_list(model)
        counts = [sum(p.numel() for p in block.parameters()) for block in blocks]
        shared = single.num_params - sum(counts)
        note = single.activation_note
        return [replace(single, num_params=shared + sum(counts[i] for i in part),
                        activation_note=f"{note}; blocks {part.start}:{part.stop} of the placed "
                                        "list")
                for part in slices(len(counts), settings.world_size)]
    if settings.mode == "context" and single.activations is not None:
        split = replace(single, activations=single.activations // settings.world_size,
                        activation_note=f"{single.activation_note}, divided over "
                                        f"{settings.world_size} ranks (the sequence split)")
        return [split] * settings.world_size
    return [single] * settings.world_size
