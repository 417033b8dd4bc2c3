"""The parallel modes, each installed on a rank's model before or after it is placed on the rank's card.

* ``cfg`` (:class:`CfgSplit`): the denoiser of a guided pipeline is called with the batch of both guidance
  branches, ``[unconditional, conditional]`` (diffusers' order: ``torch.cat([latents] * 2)`` with
  ``[negative_prompt_embeds, prompt_embeds]``). A forward pre-hook keeps this rank's half of every batch-sized
  tensor argument (rank 0 the conditional half, rank 1 the unconditional) and a forward hook all-gathers the
  two halves of the prediction back into the full batch, in the pipeline's order; the guidance arithmetic, the
  scheduler and the VAE then run unchanged, identically on both ranks (the xDiT / diffusers CFG-parallel scheme).
* ``device_map`` (:class:`BlockPlacement`): the model's largest block list (``transformer_blocks``...) is cut into
  contiguous slices, one per rank; a rank frees the weights of the blocks it does not hold (before placement,
  so its card never holds them), runs its own blocks and broadcasts each block's output to the other ranks.
* ``context`` (:func:`enable_context_parallel`): diffusers' ``enable_parallelism`` with a
  ``ContextParallelConfig`` on the denoiser, where the installed diffusers and the device allow it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
import torch.distributed as dist
from torch import nn

from ascendbench.errors import ConfigError, TaskError

# Which half of the guidance batch each rank computes: rank 0 the conditional half (index 1 of
# ``chunk(2)``), rank 1 the unconditional half (index 0); the gather puts them back in that order.
CFG_PART = {0: 1, 1: 0}
UNCONDITIONAL_RANK, CONDITIONAL_RANK = 1, 0


def denoiser_of(model: Any) -> nn.Module:
    """The denoiser of a diffusers pipeline (``transformer``, else ``unet``).

    Raises:
        ConfigError: the model has neither (not a diffusion pipeline).
    """
    for name in ("transformer", "unet"):
        module = getattr(model, name, None)
        if isinstance(module, nn.Module):
            return module
    raise ConfigError(f"device.parallel=cfg and context need a diffusion pipeline with a denoiser (transformer or "
                      f"unet); the "
                      f"model is a {type(model).__name__}. Use it with a text/image-to-video model (e.g. "
                      "`model=tiny_ltx_t2v`), or `device.parallel=device_map`.")


@dataclass(eq=False)
class CfgSplit:
    """Classifier-free guidance over two ranks, installed as hooks on the denoiser (:meth:`install`).

    Attributes:
        rank: this rank (0: conditional branch, 1: unconditional branch).
        pipe: the pipeline (its ``do_classifier_free_guidance`` is checked at every call).
        calls: denoiser calls split so far (the record's proof that the split ran).
    """

    rank: int
    pipe: Any
    calls: int = 0
    _handles: list[Any] = field(default_factory=list, repr=False)
    _batch: int = field(default=0, repr=False)

    def install(self) -> "CfgSplit":
        """Hook the pipeline's denoiser; returns self."""
        denoiser = denoiser_of(self.pipe)
        self._handles = [denoiser.register_forward_pre_hook(self._split, with_kwargs=True),
                         denoiser.register_forward_hook(self._gather, with_kwargs=True)]
        return self

    def remove(self) -> None:
        """Take the hooks off."""
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _split(self, module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        batch = _batch_size(args, kwargs)
        if not getattr(self.pipe, "do_classifier_free_guidance", True) or batch % 2:
            raise ConfigError(
                f"device.parallel=cfg: the denoiser was called with a batch of {batch}, not the two guidance branches "
                f"(guidance_scale={getattr(self.pipe, 'guidance_scale', 'unknown')}); the split needs classifier-free "
                "guidance on. Set `+model.task.call_kwargs.guidance_scale=3.0` (> 1), or run without device.parallel.")
        self._batch = batch
        part = CFG_PART[self.rank]

        def take(value: Any) -> Any:  # this rank's half of every batch-sized tensor; the rest as it is
            batched = isinstance(value, torch.Tensor) and value.dim() and value.shape[0] == batch
            return value.chunk(2)[part] if batched else value

        return tuple(take(a) for a in args), {k: take(v) for k, v in kwargs.items()}

    def _gather(self, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> Any:
        self.calls += 1
        if isinstance(output, torch.Tensor):
            return _gather_halves(output)
        if isinstance(output, (tuple, list)):
            return type(output)(_gather_halves(o) if isinstance(o, torch.Tensor) else o for o in output)
        raise TaskError(f"device.parallel=cfg: the denoiser returned a {type(output).__name__}; only tensors and "
                        "tuples of tensors (return_dict=False, as diffusers pipelines call it) can be gathered.")


def _batch_size(args: Sequence[Any], kwargs: dict) -> int:
    first = kwargs.get("hidden_states", args[0] if args else None)
    if not isinstance(first, torch.Tensor):
        raise TaskError("device.parallel=cfg: the denoiser was called without a hidden_states tensor to split.")
    return int(first.shape[0])


def _gather_halves(half: torch.Tensor) -> torch.Tensor:
    """Both ranks' halves of a prediction, in the pipeline's ``[unconditional, conditional]`` order."""
    parts = [torch.empty_like(half) for _ in range(2)]
    dist.all_gather(parts, half.contiguous())
    return torch.cat([parts[UNCONDITIONAL_RANK], parts[CONDITIONAL_RANK]])


# --- device_map: contiguous slices of the largest block list, one per rank ---------------------------------


def largest_block_list(model: Any) -> tuple[str, nn.ModuleList]:
    """``(dotted path, ModuleList)`` of the module list holding the most parameter bytes in ``model`` (a module,
    or a pipeline's modules: its denoiser's, where the denoiser has one).

    Raises:
        ConfigError: the model has no module list of two or more blocks to place.
    """
    roots = {"": model} if isinstance(model, nn.Module) else \
        {name: m for name, m in vars(model).items() if isinstance(m, nn.Module)}
    denoiser = [name for name in ("transformer", "unet") if name in roots and _has_blocks(roots[name])]
    if denoiser:  # the denoiser is what outgrows a card (LTX-Video 13B): place its blocks first
        roots = {denoiser[0]: roots[denoiser[0]]}
    best: tuple[int, str, nn.ModuleList] | None = None
    for root, module in roots.items():
        for name, sub in module.named_modules():
            if isinstance(sub, nn.ModuleList) and len(sub) >= 2:
                size = sum(p.numel() * p.element_size() for p in sub.parameters())
                path = ".".join(part for part in (root, name) if part)
                if best is None or size > best[0]:
                    best = (size, path, sub)
    if best is None:
        raise ConfigError(f"device.parallel=device_map places a block list (transformer_blocks, layers...) over the "
                          f"ranks, but {type(model).__name__} has no module list of two or more blocks. Run it on "
                          "one card (`device.world_size=1 device.parallel=none`).")
    return best[1], best[2]


def _has_blocks(module: nn.Module) -> bool:
    return any(isinstance(sub, nn.ModuleList) and len(sub) >= 2 for sub in module.modules())


def slices(count: int, world_size: int) -> list[range]:
    """``count`` blocks cut into ``world_size`` contiguous slices, the first ones one longer when uneven.

    >>> slices(5, 2)
    [range(0, 3), range(3, 5)]
    """
    if count < world_size:
        raise ConfigError(f"device.parallel=device_map: {count} block(s) cannot be placed over "
                          f"device.world_size={world_size} ranks (each rank needs one). Use fewer ranks.")
    size, extra = divmod(count, world_size)
    bounds = [0]
    for rank in range(world_size):
        bounds.append(bounds[-1] + size + (1 if rank < extra else 0))
    return [range(bounds[r], bounds[r + 1]) for r in range(world_size)]


@dataclass(eq=False)
class BlockPlacement:
    """``device_map`` over ranks: this rank holds ``slices(...)[rank]`` of the largest block list.

    Attributes:
        rank: this rank.
        world_size: ranks of the job.
        path: dotted path of the block list (set by :meth:`install`).
        owners: the rank holding each block (set by :meth:`install`).
        held_mb: parameter MiB of the block list this rank still holds (set by :meth:`install`).
    """

    rank: int
    world_size: int
    path: str = ""
    owners: list[int] = field(default_factory=list)
    held_mb: float = 0.0

    def install(self, model: Any) -> "BlockPlacement":
        """Free the blocks other ranks hold and route every block's output through its owner (before placement)."""
        self.path, blocks = largest_block_list(model)
        cut = slices(len(blocks), self.world_size)
        self.owners = [rank for rank, part in enumerate(cut) for _ in part]
        for index, block in enumerate(blocks):
            owner = self.owners[index]
            if owner != self.rank:
                _free(block)
            block.forward = _routed(block.forward, owner, self.rank)
        self.held_mb = sum(t.numel() * t.element_size() for t in blocks.parameters()) / 2**20
        return self

    def to_dict(self) -> dict[str, Any]:
        """The record's placement: which rank holds which blocks of which list."""
        held = [[i for i, o in enumerate(self.owners) if o == r] for r in range(self.world_size)]
        return {"blocks": self.path, "count": len(self.owners), "held_block_mb": self.held_mb,
                "by_rank": {str(r): f"{self.path}[{h[0]}:{h[-1] + 1}]" for r, h in enumerate(held) if h}}


def _free(block: nn.Module) -> None:
    """Drop a block's weights on this rank (empty tensors of the same dtype: the module still casts and moves)."""
    for tensor in list(block.parameters()) + list(block.buffers()):
        tensor.data = torch.empty(0, dtype=tensor.dtype, device=tensor.device)


def _routed(forward: Any, owner: int, rank: int) -> Any:
    """``forward`` run on ``owner`` only; its output broadcast to every rank."""

    def call(*args: Any, **kwargs: Any) -> Any:
        output = forward(*args, **kwargs) if rank == owner else None
        return broadcast_output(output, owner, rank)

    return call


def broadcast_output(output: Any, owner: int, rank: int) -> Any:
    """A block's output (a tensor, or a tuple/list of tensors and Nones) from ``owner`` to every rank."""
    layout: list[Any] = [None]
    if rank == owner:
        items = [output] if isinstance(output, torch.Tensor) else list(output)
        if not all(isinstance(t, torch.Tensor) or t is None for t in items):
            raise TaskError("device.parallel=device_map: a block returned something other than tensors; only "
                            "tensors and tuples of tensors can be sent between ranks.")
        kind = "tensor" if isinstance(output, torch.Tensor) else type(output).__name__
        layout = [(kind, [None if t is None else (tuple(t.shape), str(t.dtype).split(".")[-1]) for t in items])]
    dist.broadcast_object_list(layout, src=owner, device=_device())
    kind, specs = layout[0]
    received = []
    for index, spec in enumerate(specs):
        if spec is None:
            received.append(None)
            continue
        tensor = items[index].contiguous() if rank == owner else torch.empty(spec[0], dtype=getattr(torch, spec[1]),
                                                                                device=_device())
        dist.broadcast(tensor, src=owner)
        received.append(tensor)
    if rank == owner:
        return output
    return received[0] if kind == "tensor" else (tuple(received) if kind == "tuple" else received)


_DEVICE: dict[str, torch.device] = {"device": torch.device("cpu")}


def set_rank_device(device: torch.device) -> None:
    """The device collectives of this rank allocate on (its card; the CPU under gloo)."""
    _DEVICE["device"] = device


def _device() -> torch.device:
    return _DEVICE["device"]


# --- context: diffusers' own context parallelism ------------------------------------------------------------


def context_parallel_refusal(device_type: str) -> str | None:
    """Why diffusers' context parallelism cannot run here (None: it can)."""
    import diffusers

    if not hasattr(diffusers, "ContextParallelConfig"):
        return (f"the installed diffusers {diffusers.__version__} has no ContextParallelConfig / "
                "ModelMixin.enable_parallelism (added in diffusers 0.36)")
    if device_type == "cpu":
        return (f"diffusers {diffusers.__version__} builds its context-parallel device mesh on the accelerator torch "
                "was built for (ModelMixin._resolve_parallel_config: torch._C._get_accelerator(), device index "
                "rank % torch.accelerator.device_count()), so it has no CPU path under gloo")
    return None


def enable_context_parallel(model: Any, world_size: int, device_type: str) -> dict[str, Any]:
    """``denoiser.enable_parallelism(config=ContextParallelConfig(ring_degree=world_size))`` after placement.

    Raises:
        ConfigError: diffusers or the device cannot do it here (:func:`context_parallel_refusal`).
    """
    if (why := context_parallel_refusal(device_type)) is not None:
        raise ConfigError(f"device.parallel=context cannot run on {device_type}: {why}. Run it on CUDA or NPU cards "
                          "(`device=cuda device.world_size=2`), or use `device.parallel=cfg` or `device_map` here.")
    from diffusers import ContextParallelConfig

    denoiser = denoiser_of(model)
    denoiser.enable_parallelism(config=ContextParallelConfig(ring_degree=world_size))
    return {"denoiser": type(denoiser).__name__, "ring_degree": world_size}
