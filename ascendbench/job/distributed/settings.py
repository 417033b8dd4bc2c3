"""What a multi-card job asks for: ``device.world_size``, ``device.parallel``, ``device.dist``.

The backend comes from one table by device type (HCCL on Ascend, NCCL on CUDA, gloo on the CPU)
unless ``device.dist.backend`` overrides it; every refusal names the key and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ascendbench.errors import ConfigError

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
    """A job's ranks: how many, the mode (a key of :data:`MODES`), the backend, the rendezvous
    (``master_port`` 0: a free port when the ranks start), the collective timeout, and how long the
    other ranks get to exit after one fails (``grace_s``) before SIGTERM, then SIGKILL."""

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
    """Read and check the device node's parallel keys for a run on ``device_type``.

    Raises:
        ConfigError: a world size below 1, an unknown mode or backend, a mode that does not fit the
            world size (cfg needs exactly 2).
    """
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
