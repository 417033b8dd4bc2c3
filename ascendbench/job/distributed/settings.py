"""What a multi-card job asks for: ``device.world_size``, ``device.parallel`` and ``device.dist``, checked.

One table says which torch.distributed backend drives each device type (diffusers-style lookup, no
branches): HCCL on Ascend NPUs (torch_npu registers it), NCCL on CUDA, gloo on the CPU. ``device.dist.backend``
overrides it (e.g. gloo on CUDA to debug). Every refusal is one paragraph naming the key and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ascendbench.errors import ConfigError

# torch.distributed backend per device type.
BACKENDS: dict[str, str] = {"cpu": "gloo", "cuda": "nccl", "npu": "hccl"}
# The parallel modes and what each does with the ranks (docs/devices.md "Several cards").
MODES: dict[str, str] = {
    "none": "one rank (world_size 1)",
    "cfg": "classifier-free guidance split over 2 ranks: rank 0 the conditional branch, rank 1 the unconditional; "
           "the denoiser's noise predictions are all-gathered every step",
    "device_map": "the model's largest block list placed over the ranks in contiguous slices; each block runs on "
                  "the rank that holds it and its output is broadcast to the others",
    "context": "diffusers context parallelism (ModelMixin.enable_parallelism with ContextParallelConfig): the "
               "sequence split over the ranks, ring attention",
}
# Tasks whose model is a diffusers pipeline with classifier-free guidance (the cfg mode splits its batch).
CFG_TASKS = ("text_to_video", "image_to_video")


@dataclass(frozen=True)
class ParallelSettings:
    """A job's ranks: how many, in which mode, over which backend and rendezvous.

    Attributes:
        world_size: ranks of the job (1: a single-card job, nothing spawned).
        mode: a key of :data:`MODES`.
        backend: the torch.distributed backend (:data:`BACKENDS` of the device type unless overridden).
        master_addr: rendezvous address (127.0.0.1: every rank on this host).
        master_port: rendezvous port (0: a free port picked when the ranks start).
        timeout_s: the process group's collective timeout.
        grace_s: after a rank fails, how long the others get to exit before SIGTERM, then SIGKILL.
    """

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


def parallel_settings(device_cfg: Mapping[str, Any], device_type: str) -> ParallelSettings:
    """Read and check the device node's parallel keys for a run on ``device_type`` (cpu, cuda, npu).

    Raises:
        ConfigError: a world size below 1, an unknown mode, a mode that needs ranks with world_size 1 (or the
            other way round), cfg with a world size other than 2, an unknown backend.
    """
    world_size = _int(device_cfg.get("world_size", 1), "device.world_size")
    mode = str(device_cfg.get("parallel") or "none")
    dist = dict(device_cfg.get("dist") or {})
    if world_size < 1:
        raise ConfigError(f"device.world_size={world_size} must be >= 1 (1: one card; N: N ranks, one card each). "
                          "Fix the override, e.g. `device.world_size=2 device.parallel=cfg`.")
    if mode not in MODES:
        raise ConfigError(f"device.parallel={mode!r} is not a parallel mode; allowed: {', '.join(MODES)} "
                          "(none needs device.world_size=1). Fix the override, e.g. `device.parallel=cfg`.")
    _check_mode(world_size, mode)
    backend = str(dist.get("backend") or BACKENDS.get(device_type, "gloo"))
    if backend not in set(BACKENDS.values()):
        raise ConfigError(f"device.dist.backend={backend!r} is not a torch.distributed backend ascendbench drives; "
                          f"allowed: {', '.join(sorted(set(BACKENDS.values())))} (null: {BACKENDS} by device type).")
    return ParallelSettings(world_size=world_size, mode=mode, backend=backend,
                            master_addr=str(dist.get("master_addr") or "127.0.0.1"),
                            master_port=_int(dist.get("master_port") or 0, "device.dist.master_port"),
                            timeout_s=float(dist.get("timeout_s") or 300.0),
                            grace_s=float(dist.get("grace_s") if dist.get("grace_s") is not None else 5.0))


def _check_mode(world_size: int, mode: str) -> None:
    if world_size == 1 and mode != "none":
        raise ConfigError(f"device.parallel={mode} needs several ranks but device.world_size=1. Set "
                          f"`device.world_size=2` (one card per rank), or `device.parallel=none`.")
    if world_size > 1 and mode == "none":
        raise ConfigError(f"device.world_size={world_size} needs a parallel mode saying what the ranks share; "
                          f"allowed: {', '.join(m for m in MODES if m != 'none')}, e.g. `device.parallel=cfg`.")
    if mode == "cfg" and world_size != 2:
        raise ConfigError(f"device.parallel=cfg splits the two guidance branches (conditional, unconditional) over "
                          f"exactly 2 ranks, but device.world_size={world_size}. Set `device.world_size=2`.")


def _int(value: Any, key: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}={value!r} must be an integer, e.g. `{key}=2`.") from None
