"""The dry run's memory lines: what a run needs against what is free here or on a target."""

from __future__ import annotations

from typing import Any

from ascendbench.errors import ConfigError
from ascendbench.models.memory import DEFAULT_HEADROOM, RunMemory, available_host_bytes


def declared_target(cfg: Any) -> dict[str, int | None]:
    """``dry_run_target``: the declared free ``host`` and ``device`` bytes (``None``: measured)."""
    target = cfg.get("dry_run_target") or {}
    declared: dict[str, int | None] = {}
    for part in ("host", "device"):
        value = target.get(f"{part}_memory_gb")
        if value is not None and not float(value) > 0:
            raise ConfigError(
                f"dry_run_target.{part}_memory_gb={value!r} is not allowed: give the free memory "
                "of the machine the job will run on in GB (a positive number, e.g. 256), or null "
                "to plan with the memory measured on this host")
        declared[part] = None if value is None else int(float(value) * 1e9)
    return declared


def free_device_bytes(adapter: Any, cfg: Any = None) -> int:
    """Free device memory (the host's for the CPU), or ``dry_run_target.device_memory_gb``."""
    if adapter.runtime is None:
        return available_host_bytes()
    declared = declared_target(cfg)["device"] if cfg is not None else None
    return declared if declared is not None else int(adapter.runtime.mem_get_info(adapter.index)[0])


def memory_line(job: Any, what: str, need: RunMemory | int, free: int) -> dict[str, Any]:
    """A plan's memory entry: ``need`` against ``free``; one that does not fit is a problem."""
    total = need.total if isinstance(need, RunMemory) else int(need)
    entry = {"need_mb": total / 1e6, "free_mb": free / 1e6, "headroom": DEFAULT_HEADROOM,
             "fits": total <= DEFAULT_HEADROOM * free,
             **(need.to_dict() if isinstance(need, RunMemory) else {}), "what": what}
    if not entry["fits"]:
        job.problems.append(
            f"{what} needs about {entry['need_mb'] / 1e3:.1f} GB, more than the "
            f"{DEFAULT_HEADROOM:.0%} planned for of the {entry['free_mb'] / 1e3:.1f} GB free: "
            "choose a smaller preset, batch or dtype (or baseline.reference=float32 for the CPU "
            "reference)")
    return entry
