"""The replay process's memory: what one module needs with one recorded call, the precision it runs in, and the
check of the process's measured peak against that plan.

The reference process holds its imports, one module's tensors and one call at a time. During the forward the
call's inputs are live beside the activations (the output among them); after it, the inputs are freed and the
device output is read beside the replay's output, compared :data:`~ascendbench.baseline.replay_child.CHUNK`
elements at a time. So, with ``s`` the replay precision's item size::

    module need = s x parameters + max(s x inputs + activation peak, s x outputs + device outputs' bytes)
    process     = imports + max over modules (module need)

The activation peak is measured on the ``meta`` device (:class:`ascendbench.models.memory.LiveTensorBytes`),
bounded as the process runs float64. The dry run uses it with the meta model; the job again after recording, on
the recorded shapes (read from the calls' safetensors headers), before the process starts: with
``baseline.replay.precision=auto`` float64 where the process fits in host memory, else float32 (the reason in
the record), and a refusal before anything starts where neither fits. After the run, each module's measured peak
RSS (the process's ``VmHWM``, reset between modules) is checked against its plan (:func:`memory_check`).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import torch

from ascendbench.baseline.compute import bounded_if_float64
from ascendbench.baseline.memory import CHILD_PROCESS_BYTES
from ascendbench.compare.capture import decode
from ascendbench.models.memory import DEFAULT_HEADROOM, LiveTensorBytes
from ascendbench.progress import quiet

PRECISIONS = {"float64": torch.float64, "float32": torch.float32}
# A measured peak RSS above this multiple of the plan is an under-estimate: the plan counts tensors only, the
# process also has the allocator's free lists and the interpreter's own heap (measured on the tiny twins: the
# replay process's peak is within 0.8-1.05x its plan).
RSS_SLACK = 1.25
SAFETENSORS_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                      "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
                      "U8": torch.uint8, "BOOL": torch.bool}


def _bytes(call: Mapping[str, Any], tensors: Mapping[str, torch.Tensor], part: str, size: int | None) -> int:
    """Bytes of the call's ``in`` or ``out`` tensors; floating-point ones at ``size`` bytes (``None``: as stored)."""
    total = 0
    for name, tensor in tensors.items():
        if name.startswith(f"{call['key']}/{part}/"):
            item = size if size is not None and tensor.is_floating_point() else tensor.element_size()
            total += tensor.numel() * item
    return total


def activation_peak(module: torch.nn.Module, call: Mapping[str, Any], tensors: Mapping[str, torch.Tensor],
                    dtype: torch.dtype) -> int:
    """Activation peak of one meta call of ``module`` (cast to ``dtype``; bounded as the process runs it)."""
    module.to(dtype)

    def tensor(name: str) -> torch.Tensor:
        value = tensors[name]
        return value.to(dtype) if value.is_floating_point() else value

    args, kwargs = decode(call["args"], tensor), decode(call["kwargs"], tensor)
    with torch.inference_mode(), quiet(), bounded_if_float64(dtype), LiveTensorBytes() as tracker:
        module(*args, **kwargs)
    return tracker.peak


def module_need(module: torch.nn.Module, calls: list[Mapping[str, Any]], tensors: Mapping[str, torch.Tensor],
                precision: str) -> dict[str, Any]:
    """One module's need in ``precision`` with its largest recorded call (see the module docstring)."""
    dtype = PRECISIONS[precision]
    size = dtype.itemsize
    largest = max(calls, key=lambda c: _bytes(c, tensors, "in", size) + _bytes(c, tensors, "out", size))
    params = sum(t.numel() for t in [*module.parameters(), *module.buffers()])
    inputs, outputs = _bytes(largest, tensors, "in", size), _bytes(largest, tensors, "out", size)
    try:
        peak, note = activation_peak(module, largest, tensors, dtype), f"meta {precision} run" + (
            ", bounded" if dtype == torch.float64 else "")
    except Exception as exc:  # a module meta tensors cannot run: its parameters and tensors still count
        peak, note = 0, f"activation peak not estimated ({type(exc).__name__}: {str(exc)[:120]})"
    need = size * params + max(inputs + peak, outputs + _bytes(largest, tensors, "out", None))
    return {"num_params": int(params), "calls": len(calls), "call": largest["key"], "inputs_mb": inputs / 1e6,
            "outputs_mb": outputs / 1e6, "activation_peak_mb": peak / 1e6, "need_mb": need / 1e6, "note": note}


def process_plan(modules: Mapping[str, Callable[[], torch.nn.Module]], calls: list[Mapping[str, Any]],
                 tensors: Mapping[str, torch.Tensor], precision: str) -> dict[str, Any]:
    """Every module's need in ``precision`` (``modules``: name -> a builder of its meta module) and the process's."""
    per_module = []
    for name, build in modules.items():
        mine = [c for c in calls if c["module"] == name]
        per_module.append({"name": name, **(module_need(build(), mine, tensors, precision) if mine else
                                            {"calls": 0, "need_mb": 0.0})})
    largest = max(per_module, key=lambda m: m["need_mb"])
    return {"precision": precision, "per_module": per_module, "largest_module": largest,
            "child_imports_mb": CHILD_PROCESS_BYTES / 1e6,
            "reference_process_mb": CHILD_PROCESS_BYTES / 1e6 + largest["need_mb"]}


def fits(plan: Mapping[str, Any], available: int) -> bool:
    """Whether the process fits in ``DEFAULT_HEADROOM`` of ``available`` host bytes."""
    return plan["reference_process_mb"] * 1e6 <= DEFAULT_HEADROOM * available


def choose_precision(setting: str, plan_in: Callable[[str], dict[str, Any]], available: int) -> dict[str, Any]:
    """The process plan in the precision ``baseline.replay.precision`` asks for; ``auto``: float64 where it fits
    in host memory, else float32, with the reason (``choice``). ``fits`` says whether the chosen one fits."""
    first = plan_in("float64" if setting == "auto" else setting)
    if setting != "auto":
        return {**first, "choice": f"baseline.replay.precision={setting}", "fits": fits(first, available)}
    if fits(first, available):
        return {**first, "choice": "auto: float64 (the largest module with its call fits in host memory)",
                "fits": True}
    second = plan_in("float32")
    return {**second, "fits": fits(second, available),
            "choice": f"auto: float32, because in float64 the process needs about "
                      f"{first['reference_process_mb'] / 1e3:.1f} GB (largest module "
                      f"{first['largest_module']['name']}), more than {DEFAULT_HEADROOM:.0%} of the "
                      f"{available / 1e9:.1f} GB available; float32 halves the tensors"}


def header_tensors(calls_dir: str, calls: list[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
    """Meta tensors of the recorded calls' shapes and dtypes, read from their files' headers (nothing loaded)."""
    from safetensors import safe_open

    from ascendbench.baseline.replay_child import call_file

    tensors: dict[str, torch.Tensor] = {}
    for call in calls:
        with safe_open(call_file(calls_dir, call), framework="pt") as handle:
            for name in handle.keys():
                part = handle.get_slice(name)
                tensors[name] = torch.empty(part.get_shape(), dtype=SAFETENSORS_DTYPES[part.get_dtype()],
                                            device="meta")
    return tensors


def memory_check(plan: Mapping[str, Any], results: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Each module's measured peak RSS in the process against its plan (imports + its need): ``under_estimated``
    lists the modules whose peak is above :data:`RSS_SLACK` x the plan."""
    planned = {m["name"]: plan["child_imports_mb"] + m["need_mb"] for m in plan["per_module"] if m.get("calls")}
    rows = [{"module": r["module"], "planned_mb": planned[r["module"]], "measured_peak_rss_mb": r["peak_rss_mb"],
             "ratio": r["peak_rss_mb"] / planned[r["module"]]}
            for r in results if r.get("peak_rss_mb") is not None and r["module"] in planned]
    rule = (f"measured peak RSS <= {RSS_SLACK} x planned (imports + module need; the plan counts tensors only, "
            "the process also holds the allocator's free lists)")
    if not rows:
        return {"rule": rule, "modules": [], "under_estimated": [],
                "skipped": "no peak RSS measured (the process reads /proc/self/status; not on this system)"}
    return {"rule": rule, "modules": rows, "under_estimated": [r["module"] for r in rows if r["ratio"] > RSS_SLACK],
            "planned_mb": plan["reference_process_mb"], "measured_peak_rss_mb": max(r["measured_peak_rss_mb"]
                                                                                    for r in rows)}
