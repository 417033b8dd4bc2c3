""""Ran on the device": tensors, outputs and operators that fell back to the CPU (a WARN)."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import warnings
from collections import Counter
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

import torch

from ascendbench.metrics.verdict import judge
from ascendbench.models.memory import module_components
from ascendbench.precision import dtype_name

SHOWN = 5  # tensors/ops named in a finding
# torch_npu's (and MPS's) wording: "The operator 'aten::foo' is not currently supported on the NPU
# backend and will fall back to run on the CPU", and CANN's "fallback" logs.
_FALLBACK = re.compile(r"(?:operator\s+'?([\w:.]+)'?.*fall\s*back|fall\s*back.*?(aten::[\w.]+))",
                       re.I | re.S)
_FALLBACKS_SEEN: set[str] = set()  # operators that fell back in an earlier NPU job of this process
PLACEMENT_RULE_SOURCE = ("built in: a tensor off the device or an operator that fell back to the "
                         "CPU is a WARN (model.thresholds.placement_findings={max: 0} makes it a "
                         "FAIL)")


def _census(tensors: Iterator[tuple[str, torch.Tensor]], device: torch.device) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    off: list[str] = []
    for name, tensor in tensors:
        counts[f"{tensor.device.type}/{dtype_name(tensor.dtype)}"] += 1
        if tensor.device.type != device.type:
            off.append(f"{name} ({tensor.device})")
    return {"by_device_dtype": dict(counts), "off_device": len(off),
            "off_device_names": off[:SHOWN]}


def fallback_ops(messages: list[str]) -> list[str]:
    """Operator names of the CPU-fallback warnings among ``messages`` (sorted, unique)."""
    return sorted({m.group(1) or m.group(2) for m in map(_FALLBACK.search, messages) if m})


@contextmanager
def _tee_fd2(lines: list[str]) -> Iterator[None]:
    """Copy what is written to fd 2 inside (C++ logs) into ``lines``, passing it on as it comes."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no fd 2 in this process: nothing to read
        yield
        return
    read_end, write_end = os.pipe()
    chunks: list[bytes] = []

    def pump() -> None:
        while data := os.read(read_end, 65536):
            chunks.append(data)
            view = memoryview(data)
            while view:  # pass it on whole (a write may take part of it)
                try:
                    view = view[os.write(saved, view):]
                except OSError:  # the saved fd is gone: keep reading only
                    break

    reader = threading.Thread(target=pump, name="fd2-tee", daemon=True)
    reader.start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        os.dup2(saved, 2)  # the pipe's last writer closes: the reader sees the end
        reader.join(timeout=2.0)
        os.close(saved)
        if not reader.is_alive():
            os.close(read_end)
        lines.extend(b"".join(chunks).decode("utf-8", "replace").splitlines())


@contextmanager
def capture_warnings() -> Iterator[list[str]]:
    """Collect every warning and fd-2 line raised inside; let each distinct warning through once."""
    messages: list[str] = []
    with warnings.catch_warnings(record=True) as caught, _tee_fd2(messages):
        warnings.simplefilter("always")
        yield messages
    seen = set()
    for item in caught:
        messages.append(str(item.message))
        if (str(item.message), item.category) not in seen:
            seen.add((str(item.message), item.category))
            warnings.warn_explicit(item.message, item.category, item.filename, item.lineno)


def placement_check(model: Any, outputs: Mapping[str, torch.Tensor], device: torch.device,
                    offloaded: bool = False, messages: list[str] | None = None,
                    device_type: str | None = None) -> dict[str, Any]:
    """The record's ``placement_check``: tensors and outputs census, fallback ops, findings."""
    tensors = ((name if m is model else f"{k}.{name}", tensor)  # a pipeline's: "vae.<name>"
               for k, m in module_components(model).items()
               for name, tensor in [*m.named_parameters(), *m.named_buffers()])
    params = _census(tensors, device)
    outs = _census(((k, v) for k, v in outputs.items() if torch.is_tensor(v)), device)
    ops, earlier = fallback_ops(messages or []), []
    if (device_type or device.type) == "npu" and "torch_npu" in sys.modules:
        earlier = sorted(_FALLBACKS_SEEN - set(ops))  # torch_npu warns once per op per process
        _FALLBACKS_SEEN.update(ops)
    findings = []
    if params["off_device"] and not offloaded:
        findings.append(f"{params['off_device']} parameter/buffer tensor(s) are not on "
                        f"{device.type}: " + ", ".join(params["off_device_names"]))
    if outs["off_device"]:
        findings.append(f"{outs['off_device']} output(s) are not on {device.type}: "
                        + ", ".join(outs["off_device_names"]))
    if ops:
        findings.append(f"{len(ops)} operator(s) fell back to the CPU: " + ", ".join(ops[:SHOWN]))
    if earlier:
        findings.append(f"{len(earlier)} operator(s) fell back to the CPU in an earlier job of "
                        f"this process: {', '.join(earlier[:SHOWN])} (torch_npu warns once per "
                        "operator per process, so this job cannot show whether it ran them again; "
                        "run it alone to know)")
    check = {"device": device.type, "parameters": params, "parameters_judged": not offloaded,
             "outputs": outs, "fallback_ops": sorted({*ops, *earlier}),
             "fallback_ops_earlier_in_process": earlier, "ok": not findings, "findings": findings}
    return {**check, **fallback_visibility()} if (device_type or device.type) == "npu" else check


def fallback_visibility() -> dict[str, Any]:
    """The variables deciding whether torch_npu prints its fallback warning, ``not_observable``."""
    env = {k: os.environ.get(k) for k in ("TORCH_NPU_DISABLED_WARNING",
                                           "TORCH_NPU_WARNING_DISABLE", "RANK")}
    silenced = [f"{k}={v}" for k, v in env.items()
                if (v not in (None, "0") if k == "RANK" else v == "1")]
    why = f"{' and '.join(silenced)}: torch_npu prints no CPU-fallback warning"
    return {"fallback_warning_env": env, "not_observable": why if silenced else None}


def other_ranks(check: Mapping[str, Any], world_size: int) -> dict[str, Any]:
    """Rank 0's check for a multi-rank job: on an NPU other ranks' fallbacks are not observable."""
    silent = (f"ranks 1-{world_size - 1}: torch_npu prints no CPU-fallback warning where RANK is "
              "not 0; this is what rank 0 saw")
    npu = check.get("device") == "npu" and world_size > 1
    return {**check, "not_observable": check.get("not_observable") or (silent if npu else None)}


def placement_entry(check: Mapping[str, Any],
                    rules: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The judged entry ``placement_findings``: the number of findings, a WARN when any."""
    findings = list(check.get("findings") or [])
    rule = (rules or {}).get("placement_findings")
    entry = {"value": len(findings), "findings": findings,
             "fallback_ops": list(check.get("fallback_ops") or [])}
    entry = {**entry, **judge(len(findings), rule)} if rule else {
        **entry, "verdict": "WARN" if findings else "PASS", "threshold": 0, "rule": "warn > 0",
        "source": PLACEMENT_RULE_SOURCE}
    if check.get("not_observable") and entry["verdict"] == "PASS":  # none seen: none could be
        return {**entry, "verdict": "WARN", "not_observable": check["not_observable"],
                "rule": "CPU fallbacks observable", "source": PLACEMENT_RULE_SOURCE}
    return entry
