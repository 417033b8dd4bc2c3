"""Peak dense TFLOP/s of a device for a dtype, from the table in ``conf/device/peak/``.

The table maps entry names to ``{match: [substrings], <dtype>: TFLOP/s, ..., source: text}``. The
entry whose longest ``match`` substring occurs in the device name reported by the runtime wins
(``torch.cuda.get_device_name`` / ``torch.npu.get_device_name``: "NVIDIA H200", "Ascend910B4"), so
"H100 PCIe" beats "H100" whatever the order. ``device.peak.override.<dtype>`` wins over the table.
A float32 run with TF32/HF32 allowed uses the ``tf32`` figure of the entry.
"""

from __future__ import annotations

from typing import Any, Mapping


def match_entry(table: Mapping[str, Mapping[str, Any]], device_name: str) -> tuple[str, Mapping[str, Any]] | None:
    """The table entry for ``device_name`` (longest matching substring, case-insensitive), or ``None``."""
    best: tuple[int, str, Mapping[str, Any]] | None = None
    name = device_name.lower()
    for key, entry in (table or {}).items():
        for pattern in entry.get("match") or [key]:
            if str(pattern).lower() in name and (best is None or len(str(pattern)) > best[0]):
                best = (len(str(pattern)), key, entry)
    return (best[1], best[2]) if best else None


def peak_tflops(peak_cfg: Mapping[str, Any] | None, device_name: str, dtype: str,
                reduced_fp32: bool = False) -> dict[str, Any]:
    """Peak TFLOP/s of ``device_name`` in ``dtype`` with its source; ``tflops`` is ``None`` if unknown.

    Args:
        peak_cfg: ``device.peak`` (``override`` and ``table``).
        device_name: the name the device runtime reports.
        dtype: ``float32``, ``float16`` or ``bfloat16``.
        reduced_fp32: TF32/HF32 is allowed, so float32 matmuls run at the ``tf32`` rate.

    >>> table = {"H200": {"match": ["H200"], "bfloat16": 989.4, "source": "NVIDIA datasheet"}}
    >>> peak_tflops({"table": table}, "NVIDIA H200", "bfloat16")["tflops"]
    989.4
    """
    peak_cfg = peak_cfg or {}
    key = "tf32" if dtype == "float32" and reduced_fp32 else dtype
    override = (peak_cfg.get("override") or {}).get(key)
    if override is not None:
        return {"tflops": float(override), "source": f"user override device.peak.override.{key}",
                "entry": None, "key": key}
    found = match_entry(peak_cfg.get("table") or {}, device_name)
    if found is None:
        return {"tflops": None, "source": None, "entry": None, "key": key,
                "missing": f"no entry of device.peak.table matches device name {device_name!r}; "
                           f"set `device.peak.override.{key}=<TFLOP/s>` to get MFU"}
    entry_name, entry = found
    value = entry.get(key)
    if value is None:
        return {"tflops": None, "source": entry.get("source"), "entry": entry_name, "key": key,
                "missing": f"device.peak.table.{entry_name} has no {key} figure; "
                           f"set `device.peak.override.{key}=<TFLOP/s>` to get MFU"}
    return {"tflops": float(value), "source": entry.get("source"), "entry": entry_name, "key": key}
