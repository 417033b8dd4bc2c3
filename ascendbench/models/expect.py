"""Did the configuration land in the instance? Values read back by attribute path.

``model.loader.expect`` maps a path to the value the instance must hold, e.g.::

    expect:
      chunk_size: 17
      video_preprocess_args.size: 256
      video_tokenizer.regularizer._levels: [8, 8, 8, 5, 5, 5]
      video_tokenizer.decoder.@depth: 28

A path is a dotted chain of attributes, mapping keys or list indices. The last segment may be a
computed property:

* ``@depth`` -- the number of blocks of the deepest transformer below: the longest ``blocks``
  ``nn.ModuleList`` found among the submodules of the object;
* ``@len`` -- ``len()`` of the object.

Tensors compare by their ``tolist()``, tuples as lists.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

_NOT_FOUND = object()


def _step(obj: Any, segment: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(segment, _NOT_FOUND)
    if isinstance(obj, (list, tuple, torch.nn.ModuleList)) and segment.lstrip("-").isdigit():
        index = int(segment)
        return obj[index] if -len(obj) <= index < len(obj) else _NOT_FOUND
    return getattr(obj, segment, _NOT_FOUND)


def transformer_depth(obj: Any) -> int:
    """Length of the longest ``blocks`` ModuleList among ``obj``'s submodules (0 if none)."""
    modules = obj.modules() if isinstance(obj, torch.nn.Module) else ()
    lengths = [len(m.blocks) for m in modules if isinstance(getattr(m, "blocks", None), torch.nn.ModuleList)]
    return max(lengths, default=0)


_COMPUTED = {"@depth": transformer_depth, "@len": len}


def read_path(obj: Any, path: str) -> Any:
    """The value at ``path`` below ``obj``; raises ``KeyError`` naming the missing segment."""
    for segment in path.split("."):
        if segment in _COMPUTED:
            return _COMPUTED[segment](obj)
        obj = _step(obj, segment)
        if obj is _NOT_FOUND:
            raise KeyError(f"{segment!r} not found")
    return obj


def _normalise(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _normalise(v) for k, v in value.items()}
    return value


def check_expected(obj: Any, expect: Mapping[str, Any]) -> dict[str, Any]:
    """Compare every expected value with the instance: ``{mismatches, checks: {path: ...}}``.

    >>> check_expected({"a": {"b": (1, 2)}}, {"a.b": [1, 2], "a.c": 3})["mismatches"]
    1
    """
    checks: dict[str, dict[str, Any]] = {}
    for path, expected in expect.items():
        try:
            actual = _normalise(read_path(obj, path))
        except KeyError as exc:
            checks[path] = {"expected": expected, "actual": None, "ok": False, "error": f"path {path!r}: {exc.args[0]}"}
            continue
        checks[path] = {"expected": expected, "actual": actual, "ok": actual == _normalise(expected)}
    return {"mismatches": sum(not c["ok"] for c in checks.values()), "checks": checks}
