"""Peak dense TFLOP/s of a device and dtype (``conf/device/peak/``, or derived from CANN's ini)."""

from __future__ import annotations

from typing import Any, Mapping

DERIVED_DTYPES = ("float16", "bfloat16")


def match_entry(table: Mapping[str, Mapping[str, Any]],
                device_name: str) -> tuple[str, Mapping[str, Any]] | None:
    """The table entry for ``device_name``: exact ``names``, else the longest ``match``."""
    for key, entry in (table or {}).items():
        if device_name in [str(n) for n in entry.get("names") or []]:
            return key, entry
    best: tuple[int, str, Mapping[str, Any]] | None = None
    name = device_name.lower()
    for key, entry in (table or {}).items():
        if entry.get("names") and not entry.get("match"):
            continue  # an exact-name entry: its names are not substrings to look for
        for pattern in entry.get("match") or [key]:
            if str(pattern).lower() in name and (best is None or len(str(pattern)) > best[0]):
                best = (len(str(pattern)), key, entry)
    return (best[1], best[2]) if best else None


def derived_figure(derive: Mapping[str, Any] | None,
                   chip: Mapping[str, Any] | None) -> tuple[float | None, str]:
    """float16/bfloat16 TFLOP/s from cube figures (CANN ini over ``derive``) and their source."""
    chip = chip or {}
    platform = chip.get("platform_config")
    figures, told = dict(derive or {}), "table"
    if platform:
        figures, told = dict(platform), f"CANN {platform['path']}"
    if chip.get("cube_core_num"):
        figures["cube_cores"] = chip["cube_core_num"]
        told = f"{told}; cores from get_device_properties().cube_core_num"
    cores, clock = figures.get("cube_cores"), figures.get("cube_clock_ghz")
    if not cores or not clock:
        missing = [k for k, v in (("AI-core count", cores), ("cube clock", clock)) if not v]
        return None, (f"the {' and '.join(missing)} of this chip is unknown: no CANN "
                      "platform_config/<SoC>.ini found on this host (set ASCEND_HOME_PATH, e.g. "
                      "`source .../ascend-toolkit/set_env.sh`) and no table figure")
    macs = int(figures.get("macs_per_cycle") or 4096)
    tflops = int(cores) * macs * 2 * float(clock) * 1e9 / 1e12
    return tflops, (f"{cores} cube cores x {macs} MACs x 2 FLOP x {float(clock):g} GHz = "
                    f"{tflops:.2f} TFLOP/s ({told})")


def peak_tflops(peak_cfg: Mapping[str, Any] | None, device_name: str, dtype: str,
                reduced_fp32: bool = False,
                chip: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Peak TFLOP/s of ``device_name`` in ``dtype`` from ``device.peak`` with its source.
    >>> table = {"H200": {"match": ["H200"], "bfloat16": 989.4, "source": "NVIDIA datasheet"}}
    >>> peak_tflops({"table": table}, "NVIDIA H200", "bfloat16")["tflops"]
    989.4"""
    peak_cfg = peak_cfg or {}
    key = "tf32" if dtype == "float32" and reduced_fp32 else dtype
    fix = f"set `device.peak.override.{key}=<TFLOP/s>` to get MFU"
    override = (peak_cfg.get("override") or {}).get(key)
    if override is not None:
        return {"tflops": float(override), "source": f"user override device.peak.override.{key}",
                "entry": None, "key": key}
    found = match_entry(peak_cfg.get("table") or {}, device_name)
    if found is None and (chip or {}).get("platform_config"):
        found = ("platform_config",
                 {"derive": {}, "source": "no table entry; the host's CANN platform file"})
    if found is None:
        return {"tflops": None, "source": None, "entry": None, "key": key,
                "missing": f"unknown device {device_name!r}: no entry of device.peak.table names "
                           f"it (Ascend chips match by exact name); {fix}"}
    entry_name, entry = found
    value, source, why = entry.get(key), entry.get("source"), "none listed"
    if value is None and "derive" in entry and key in DERIVED_DTYPES:
        value, why = derived_figure(entry["derive"], chip)
        source = f"{why}; {source}" if value is not None else source
    if value is None:
        return {"tflops": None, "source": source, "entry": entry_name, "key": key,
                "missing": f"device.peak.table.{entry_name} has no {key} figure for "
                           f"{device_name!r} ({why}); {fix}"}
    return {"tflops": float(value), "source": source, "entry": entry_name, "key": key}
