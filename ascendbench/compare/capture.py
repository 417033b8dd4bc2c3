"""What the replay reference needs from the device run: the inputs and outputs of sampled module calls.

:class:`CallRecorder` hooks the chosen modules (a pre-hook copies the call's inputs before ``forward`` can
change them in place, a forward hook copies the outputs) for a bounded sample of their calls -- ``first``,
``last`` or call indices (a transformer block is called once per denoising step: ``[first, last]`` is the
first and the last step). Arguments are kept as a *skeleton*, plain JSON in which each tensor is replaced by
the name of its copy (``<module>#<call>/in/<i>``), so that the reference process can call the module again
with the same arguments. A call whose arguments hold something else than tensors, numbers, strings, None
and containers of them cannot be replayed; it is listed in ``unreplayable`` with the type found.

With ``spill`` (a folder), each recorded call is written to its own safetensors file there as soon as it
finishes (``<n>.safetensors``, named in the call's ``file``) and dropped from memory, so the job holds at most
one call's tensors, and the reference process reads one call's file at a time. The same recorder runs on the
meta device for the dry run (``keep=False``): only shapes are kept there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch

from ascendbench.compare.files import save_tensors
from ascendbench.compare.hooks import ROOT, flatten_tensors
from ascendbench.precision import REFERENCE_DTYPES, TORCH_DTYPES, dtype_name


class Unreplayable(TypeError):
    """An argument of a module call that the reference process could not rebuild."""


def encode(value: Any, tensors: dict[str, torch.Tensor], prefix: str, keep: bool = True) -> Any:
    """``value`` as a JSON skeleton; its tensors are added to ``tensors`` under ``<prefix>/<n>``."""
    if isinstance(value, torch.Tensor):
        name = f"{prefix}/{len(tensors)}"
        tensors[name] = value.detach().to("cpu", copy=True).contiguous() if keep else value.detach()
        return {"t": name}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"v": value}
    if isinstance(value, torch.dtype):
        return {"dtype": dtype_name(value)}
    if isinstance(value, (list, tuple)):
        return {"seq": [encode(v, tensors, prefix, keep) for v in value], "tuple": isinstance(value, tuple)}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"map": {k: encode(v, tensors, prefix, keep) for k, v in value.items()}}
    raise Unreplayable(type(value).__name__)


def decode(skeleton: Any, tensor: Any) -> Any:
    """The value of a skeleton, with ``tensor(name)`` giving each tensor (cast as the caller wants)."""
    if "t" in skeleton:
        return tensor(skeleton["t"])
    if "v" in skeleton:
        return skeleton["v"]
    if "dtype" in skeleton:
        return {**TORCH_DTYPES, **REFERENCE_DTYPES}[skeleton["dtype"]]
    if "seq" in skeleton:
        items = [decode(s, tensor) for s in skeleton["seq"]]
        return tuple(items) if skeleton["tuple"] else items
    return {k: decode(s, tensor) for k, s in skeleton["map"].items()}


@dataclass
class CallRecord:
    """One recorded call: ``key`` (``<module>#<call>``), its argument skeletons, output tensor names, bytes."""

    key: str
    module: str
    call: int
    args: Any = None
    kwargs: Any = None
    outputs: list[str] = field(default_factory=list)
    nbytes: int = 0
    file: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON for the manifest."""
        return {"key": self.key, "module": self.module, "call": self.call, "args": self.args,
                "kwargs": self.kwargs, "outputs": self.outputs, "nbytes": self.nbytes,
                **({"file": self.file} if self.file else {})}


def _bytes(tensors: dict[str, torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors.values())


class CallRecorder:
    """Inputs and outputs of sampled calls of chosen modules (see the module docstring).

    Args:
        modules: ``name -> module`` to hook.
        calls: which calls of each module: ``first``, ``last`` and call indices.
        max_bytes: calls beyond this many recorded bytes are dropped (named in ``dropped``).
        keep: copy tensors to the CPU (``False``: keep the tensors as they are, for a meta run).
        spill: a folder: each recorded call goes to its own file there at once (see the module docstring).
    """

    def __init__(self, modules: dict[str, torch.nn.Module], calls: Sequence[Any], max_bytes: int,
                 keep: bool = True, spill: Path | None = None) -> None:
        self.calls_wanted = [c if c in ("first", "last") else int(c) for c in calls]
        self.max_bytes, self.keep, self.spill = int(max_bytes), keep, spill
        self.kept_bytes, self.peak_call_bytes, self._files = 0, 0, 0
        if spill is not None:
            spill.mkdir(parents=True, exist_ok=True)
        self.counts: dict[str, int] = {}
        self.records: dict[str, CallRecord] = {}
        self.tensors: dict[str, torch.Tensor] = {}
        self.order: list[str] = []
        self.dropped: list[str] = []
        self.unreplayable: dict[str, str] = {}
        self._pending: dict[str, tuple[CallRecord, dict[str, torch.Tensor]] | None] = {}
        self._last: dict[str, str] = {}
        self._handles = []
        for name, module in modules.items():
            self._handles.append(module.register_forward_pre_hook(self._pre(name), with_kwargs=True))
            self._handles.append(module.register_forward_hook(self._post(name), with_kwargs=True))

    def _sampled(self, call: int) -> bool:
        return "last" in self.calls_wanted or call in self.calls_wanted or (call == 0 and "first" in self.calls_wanted)

    def _pre(self, name: str):
        label = name or ROOT

        def hook(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
            call = self.counts.get(label, 0)
            self.counts[label] = call + 1
            self._pending[label] = None
            if not self._sampled(call) or label in self.unreplayable:
                return
            record, tensors = CallRecord(f"{label}#{call}", name, call), {}
            try:
                record.args = encode(list(args), tensors, f"{record.key}/in", self.keep)
                record.kwargs = encode(dict(kwargs), tensors, f"{record.key}/in", self.keep)
            except Unreplayable as exc:
                self.unreplayable[label] = f"an argument of type {exc} (only tensors, numbers, strings and containers)"
                return
            self._pending[label] = (record, tensors)
        return hook

    def _post(self, name: str):
        label = name or ROOT

        def hook(module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
            pending = self._pending.pop(label, None)
            if pending is None:
                return
            record, tensors = pending
            for index, tensor in enumerate(flatten_tensors(output)):
                out = f"{record.key}/out/{index}"
                tensors[out] = tensor.detach().to("cpu", copy=True).contiguous() if self.keep else tensor.detach()
                record.outputs.append(out)
            self._store(label, record, tensors)
        return hook

    def _store(self, label: str, record: CallRecord, tensors: dict[str, torch.Tensor]) -> None:
        keep_first = record.call == 0 and "first" in self.calls_wanted or record.call in self.calls_wanted
        previous = self._last.pop(label, None)
        if previous is not None:  # an earlier "last" candidate, superseded by this call
            self._forget(previous)
        record.nbytes = _bytes(tensors)
        if self.kept_bytes + record.nbytes > self.max_bytes:
            self.dropped.append(record.key)
            return
        self.records[record.key] = record
        self.kept_bytes += record.nbytes
        self.peak_call_bytes = max(self.peak_call_bytes, record.nbytes)
        if self.spill is None:
            self.tensors.update(tensors)
        else:
            self._write(record, tensors)
        self.order.append(record.key)
        if not keep_first:
            self._last[label] = record.key

    def _write(self, record: CallRecord, tensors: dict[str, torch.Tensor]) -> None:
        record.file = f"{self._files}.safetensors"
        self._files += 1
        save_tensors(self.spill / record.file, tensors)
        tensors.clear()

    def _forget(self, key: str) -> None:
        record = self.records.pop(key)
        self.order.remove(key)
        self.kept_bytes -= record.nbytes
        for name in [n for n in self.tensors if n.startswith(f"{key}/")]:
            del self.tensors[name]
        if record.file:
            (self.spill / record.file).unlink(missing_ok=True)
        del record

    def manifest(self) -> dict[str, Any]:
        """The recorded calls in completion order, with what was dropped or could not be recorded."""
        return {"calls": [self.records[key].to_dict() for key in self.order], "dropped": list(self.dropped),
                "unreplayable": dict(self.unreplayable), "counts": dict(self.counts)}

    def close(self) -> None:
        """Remove every hook."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
