""""Ran on the device": where the model's tensors and the outputs really were, and what fell back.

After the device run a job checks that every parameter and buffer of the model (every module component
of a pipeline) and every output tensor is on the requested device, and counts them per (device, dtype).
A tensor left on the host is a WARN naming the first few (a model CPU offload puts parameters on the
host by design: then the parameters are not judged, and the record says so). On an NPU, torch_npu warns
when an operator has no NPU kernel and runs on the CPU instead (the LTX-VAE seed checked "no fallback" by
hand). Its CAUTION line goes through the C++ log to file descriptor 2, once per operator per process, and
never reaches Python ``warnings``: :func:`capture_warnings` therefore also tees fd 2 during the device run,
and both are parsed for operator names. A later job of the same process gets no new line for an operator
it runs again, so the operators seen earlier in the process are attributed to it too (said so in the
finding). Any fallback is a WARN, or a FAIL when ``model.thresholds.placement_findings`` sets ``{max: 0}``.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import warnings
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

import torch

from ascendbench.precision import dtype_name

SHOWN = 5  # tensors/ops named in a finding
# torch_npu / PyTorch's own wording of a CPU fallback (also MPS's): "The operator 'aten::foo' is not
# currently supported on the NPU backend and will fall back to run on the CPU", and CANN's "fallback" logs.
_FALLBACK = re.compile(r"(?:operator\s+'?([\w:.]+)'?.*fall\s*back|fall\s*back.*?(aten::[\w.]+))", re.I | re.S)
# Operators that fell back in an earlier job of this process (torch_npu loaded): torch_npu stays silent on them.
_FALLBACKS_SEEN: set[str] = set()


def module_tensors(model: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) of every parameter and buffer of a module, or of each module component of a pipeline."""
    if isinstance(model, torch.nn.Module):
        modules = {"": model}
    else:
        components = getattr(model, "components", None) or {}
        modules = {f"{k}.": v for k, v in components.items() if isinstance(v, torch.nn.Module)}
    for prefix, module in modules.items():
        for name, tensor in [*module.named_parameters(), *module.named_buffers()]:
            yield prefix + name, tensor


def _census(tensors: Iterator[tuple[str, torch.Tensor]], device: torch.device) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    off: list[str] = []
    for name, tensor in tensors:
        counts[f"{tensor.device.type}/{dtype_name(tensor.dtype)}"] += 1
        if tensor.device.type != device.type:
            off.append(f"{name} ({tensor.device})")
    return {"by_device_dtype": dict(counts), "off_device": len(off), "off_device_names": off[:SHOWN]}


def fallback_ops(messages: list[str]) -> list[str]:
    """Operator names of the CPU-fallback warnings among ``messages`` (sorted, unique).

    >>> fallback_ops(["The operator 'aten::_unique2' is not currently supported on the NPU backend and "
    ...               "will fall back to run on the CPU.", "unrelated"])
    ['aten::_unique2']
    """
    found = set()
    for message in messages:
        match = _FALLBACK.search(message)
        if match:
            found.add(match.group(1) or match.group(2))
    return sorted(found)


@dataclass
class WarningCapture:
    """The warning messages raised inside :func:`capture_warnings` (each also re-emitted once after)."""

    messages: list[str] = field(default_factory=list)


@contextmanager
def _tee_fd2(lines: list[str]) -> Iterator[None]:
    """Copy what is written to file descriptor 2 inside (C++ logs) into ``lines``, passing it on as it comes."""
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
                except OSError:  # the saved fd is gone (the capture ended without us): keep reading only
                    break

    reader = threading.Thread(target=pump, name="fd2-tee", daemon=True)
    reader.start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(saved, 2)  # the pipe's last writer closes: the reader sees the end
        reader.join(timeout=2.0)
        os.close(saved)
        if not reader.is_alive():
            os.close(read_end)
        lines.extend(b"".join(chunks).decode("utf-8", "replace").splitlines())


@contextmanager
def capture_warnings() -> Iterator[WarningCapture]:
    """Record every warning raised inside (repeats included) and every line written to fd 2, then let each
    distinct warning through once (the fd-2 lines went through as they were written)."""
    capture, fd2_lines = WarningCapture(), []
    with warnings.catch_warnings(record=True) as caught, _tee_fd2(fd2_lines):
        warnings.simplefilter("always")
        yield capture
    capture.messages.extend(fd2_lines)
    seen = set()
    for item in caught:
        capture.messages.append(str(item.message))
        key = (str(item.message), item.category)
        if key not in seen:
            seen.add(key)
            warnings.warn_explicit(item.message, item.category, item.filename, item.lineno)


@dataclass
class PlacementInputs:
    """What the check looks at: the placed model, the raw device outputs, the warnings of the run."""

    model: Any
    outputs: Mapping[str, torch.Tensor]
    device: torch.device
    offloaded: bool = False
    messages: list[str] = field(default_factory=list)
    device_type: str | None = None  # the adapter's type (npu, ...) where tensors live elsewhere; default: device's


def placement_check(inputs: PlacementInputs) -> dict[str, Any]:
    """The record's ``placement_check``: census of model tensors and outputs, fallback ops, findings."""
    params = _census(module_tensors(inputs.model), inputs.device)
    outputs = _census(((k, v) for k, v in inputs.outputs.items() if torch.is_tensor(v)), inputs.device)
    ops, earlier = _attributed_fallbacks(fallback_ops(inputs.messages), inputs.device_type or inputs.device.type)
    findings = []
    if params["off_device"] and not inputs.offloaded:
        findings.append(f"{params['off_device']} parameter/buffer tensor(s) are not on {inputs.device.type}: "
                        + ", ".join(params["off_device_names"]))
    if outputs["off_device"]:
        findings.append(f"{outputs['off_device']} output(s) are not on {inputs.device.type}: "
                        + ", ".join(outputs["off_device_names"]))
    if ops:
        findings.append(f"{len(ops)} operator(s) fell back to the CPU: " + ", ".join(ops[:SHOWN]))
    if earlier:
        findings.append(f"{len(earlier)} operator(s) fell back to the CPU in an earlier job of this process: "
                        + ", ".join(earlier[:SHOWN]) + " (torch_npu warns once per operator per process, so this "
                        "job cannot show whether it ran them again; run it alone to know)")
    return {
        "device": inputs.device.type,
        "parameters": params,
        "parameters_judged": not inputs.offloaded,
        "outputs": outputs,
        "fallback_ops": sorted({*ops, *earlier}),
        "fallback_ops_earlier_in_process": earlier,
        "ok": not findings,
        "findings": findings,
    }


def _attributed_fallbacks(ops: list[str], device_type: str) -> tuple[list[str], list[str]]:
    """(operators this job's warnings name, those of earlier NPU jobs it cannot see again) for an NPU job.

    Only NPU jobs with torch_npu loaded remember and inherit: its once-per-process warning is the only reason."""
    if device_type != "npu" or "torch_npu" not in sys.modules:
        return ops, []
    earlier = sorted(_FALLBACKS_SEEN - set(ops))
    _FALLBACKS_SEEN.update(ops)
    return ops, earlier


PLACEMENT_RULE_SOURCE = ("built in: a tensor off the device or an operator that fell back to the CPU is a WARN "
                         "(model.thresholds.placement_findings={max: 0} makes it a FAIL)")


def placement_entry(check: Mapping[str, Any], rules: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The judged entry ``placement_findings`` of a :func:`placement_check`: the number of findings, WARN when
    any (a recorded fact, not a failure, unless the job's rules hold ``placement_findings``).

    >>> placement_entry({"findings": [], "fallback_ops": []})["verdict"]
    'PASS'
    >>> placement_entry({"findings": ["1 operator(s) fell back"], "fallback_ops": ["aten::x"]})["verdict"]
    'WARN'
    """
    from ascendbench.metrics.verdict import judge

    findings = list(check.get("findings") or [])
    rule = (rules or {}).get("placement_findings")
    entry = {"value": len(findings), "findings": findings, "fallback_ops": list(check.get("fallback_ops") or [])}
    if rule:
        return {**entry, **judge(len(findings), rule)}
    return {**entry, "verdict": "WARN" if findings else "PASS", "threshold": 0, "rule": "warn > 0",
            "source": PLACEMENT_RULE_SOURCE}
