"""Inputs and outputs of sampled module calls for the replay (JSON skeletons naming tensors)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch

from ascendbench.compare.files import save_tensors
from ascendbench.compare.hooks import ROOT, flatten_tensors
from ascendbench.precision import REFERENCE_DTYPES, TORCH_DTYPES, dtype_name


def _copy(tensor: torch.Tensor, keep: bool) -> torch.Tensor:
    return tensor.detach().to("cpu", copy=True).contiguous() if keep else tensor.detach()


class Unreplayable(TypeError):
    """An argument of a module call that the replay process could not rebuild."""


def encode(value: Any, tensors: dict[str, torch.Tensor], prefix: str, keep: bool = True) -> Any:
    """``value`` as a JSON skeleton; its tensors are added to ``tensors`` under ``<prefix>/<n>``."""
    if isinstance(value, torch.Tensor):
        name = f"{prefix}/{len(tensors)}"
        tensors[name] = _copy(value, keep)
        return {"t": name}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"v": value}
    if isinstance(value, torch.dtype):
        return {"dtype": dtype_name(value)}
    if isinstance(value, (list, tuple)):
        items = [encode(v, tensors, prefix, keep) for v in value]
        return {"seq": items, "tuple": isinstance(value, tuple)}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"map": {k: encode(v, tensors, prefix, keep) for k, v in value.items()}}
    raise Unreplayable(type(value).__name__)


def decode(skeleton: Any, tensor: Callable[[str], torch.Tensor]) -> Any:
    """The value of a skeleton, ``tensor(name)`` giving each tensor (cast as the caller wants)."""
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


def call_file(calls_dir: str | Path, call: Mapping[str, Any]) -> str:
    """The file of one recorded call inside ``calls_dir`` (a name from a manifest is data)."""
    name = str(call.get("file") or "")
    if not name.endswith(".safetensors") or Path(name).name != name or name.startswith("."):
        raise ValueError(f"recorded call {call.get('key')!r} names file {name!r}, not a file of "
                         f"{calls_dir}")
    return str(Path(calls_dir) / name)


class CallRecorder:
    """Inputs and outputs of the sampled ``calls`` of ``modules`` (past ``max_bytes``: dropped)."""

    def __init__(self, modules: dict[str, torch.nn.Module], calls: Sequence[Any], max_bytes: int,
                 keep: bool = True, spill: Path | None = None) -> None:
        self.wanted = [c if c in ("first", "last") else int(c) for c in calls]
        self.max_bytes, self.keep, self.spill = int(max_bytes), keep, spill
        self.kept_bytes = self.peak_call_bytes = self._files = 0
        if spill is not None:
            spill.mkdir(parents=True, exist_ok=True)
        self.counts: dict[str, int] = {}
        self.records: dict[str, dict[str, Any]] = {}  # completion order
        self.tensors: dict[str, torch.Tensor] = {}
        self.dropped: list[str] = []
        self.unreplayable: dict[str, str] = {}
        self._pending: dict[str, tuple[dict[str, Any], dict[str, torch.Tensor]] | None] = {}
        self._last: dict[str, str] = {}  # a module's latest "last" candidate, until its next call
        self._handles = []
        for name, module in modules.items():
            label = name or ROOT
            self._handles += [module.register_forward_pre_hook(self._pre(label), with_kwargs=True),
                              module.register_forward_hook(self._post(label), with_kwargs=True)]

    def _pre(self, label: str) -> Callable[..., None]:
        def hook(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
            call = self.counts.get(label, 0)
            self.counts[label] = call + 1
            self._pending[label] = None
            sampled = "last" in self.wanted or call in self.wanted or (
                call == 0 and "first" in self.wanted)
            if not sampled or label in self.unreplayable:
                return
            key, tensors = f"{label}#{call}", {}
            record = {"key": key, "module": "" if label == ROOT else label, "call": call,
                      "outputs": []}
            try:
                record["args"] = encode(list(args), tensors, f"{key}/in", self.keep)
                record["kwargs"] = encode(dict(kwargs), tensors, f"{key}/in", self.keep)
            except Unreplayable as exc:
                self.unreplayable[label] = (f"an argument of type {exc} (only tensors, numbers, "
                                            "strings and containers)")
                return
            self._pending[label] = (record, tensors)
        return hook

    def _post(self, label: str) -> Callable[..., None]:
        def hook(module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
            pending = self._pending.pop(label, None)
            if pending is not None:
                record, tensors = pending
                for index, tensor in enumerate(flatten_tensors(output)):
                    tensors[f"{record['key']}/out/{index}"] = _copy(tensor, self.keep)
                    record["outputs"].append(f"{record['key']}/out/{index}")
                self._store(label, record, tensors)
        return hook

    def _store(self, label: str, record: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
        call = record["call"]
        wanted = call == 0 and "first" in self.wanted or call in self.wanted
        previous = self._last.pop(label, None)
        if previous is not None:
            self._forget(previous)
        record["nbytes"] = sum(t.numel() * t.element_size() for t in tensors.values())
        if self.kept_bytes + record["nbytes"] > self.max_bytes:
            self.dropped.append(record["key"])
            return
        self.records[record["key"]] = record
        self.kept_bytes += record["nbytes"]
        self.peak_call_bytes = max(self.peak_call_bytes, record["nbytes"])
        if self.spill is None:
            self.tensors.update(tensors)
        else:
            record["file"] = f"{self._files}.safetensors"
            self._files += 1
            save_tensors(self.spill / record["file"], tensors)
            tensors.clear()
        if not wanted:
            self._last[label] = record["key"]

    def _forget(self, key: str) -> None:
        record = self.records.pop(key)
        self.kept_bytes -= record["nbytes"]
        for name in [n for n in self.tensors if n.startswith(f"{key}/")]:
            del self.tensors[name]
        if record.get("file"):
            (self.spill / record["file"]).unlink(missing_ok=True)

    def manifest(self) -> dict[str, Any]:
        """The recorded calls in completion order, and what was dropped or could not be recorded."""
        return {"calls": [dict(r) for r in self.records.values()], "dropped": list(self.dropped),
                "unreplayable": dict(self.unreplayable), "counts": dict(self.counts)}

    def close(self) -> None:
        """Remove every hook."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
