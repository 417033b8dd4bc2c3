"""A stand-in for ``torch.npu`` that behaves like torch_npu where the card matters.

Each behaviour copies torch_npu's own code: ``get_device_name(i)`` names the *current* card whatever
``i`` (2.9.0 ``torch_npu/npu/__init__.py:458-462``), ``is_jit_compile_false()`` initialises the
current card (``npu_config.py:147-149``), ``Event.record()`` records on the current card's stream,
``set_option`` takes a dict of the ``_option_map`` keys (``npu_config.py:22-30``),
``config.allow_internal_format`` is write-only (``npu_config.py:152-156``) and
``get_device_properties(i).cube_core_num`` exists (the 7.2.0 branches on: 2.6.0.post3, 2.7.1 and
newer; ``Module.cpp:144`` on v2.9.0-7.3.0).
"""

from __future__ import annotations

import types

ACL_OPTIONS = {"ACL_PRECISION_MODE": ("allow_fp32_to_fp16", "must_keep_origin_dtype")}


class _Config:
    def __init__(self, rt):
        object.__setattr__(self, "_rt", rt)

    def __setattr__(self, name, value):  # torch_npu's _npuConfig: a setter, no getter
        if name == "allow_internal_format":
            self._rt.log.append(("option", "ALLOW_INTERNAL_FORMAT",
                                 "enable" if value else "disable"))


class FakeEvent:
    def __init__(self, rt):
        self.rt = rt

    def record(self, stream=None):
        self.rt.log.append(("record", self.rt.current))
        self.rt.contexts.add(self.rt.current)

    def elapsed_time(self, end):
        return 1.0


class FakeNpu:
    """``torch.npu`` with ``names[i]`` as card i's chip; ``log`` keeps every call that touches a
    card."""

    def __init__(self, names=("Ascend910B4", "Ascend910B4"), cube_core_num=20):
        self.names, self.cube_core_num = list(names), cube_core_num
        self.current, self.log, self.contexts = 0, [], set()
        self.matmul = types.SimpleNamespace(allow_hf32=True)
        self.conv = types.SimpleNamespace(allow_hf32=True)
        self.config = _Config(self)
        self.jit = False

    def is_available(self):
        return True

    def device_count(self):
        return len(self.names)

    def set_device(self, index):
        self.log.append(("set_device", index))
        self.current = index

    def current_device(self):
        return self.current

    def get_device_name(self, index=None):
        return self.names[self.current]

    def get_device_properties(self, index=None):
        return types.SimpleNamespace(name=self.names[index], total_memory=32 * 2**30,
                                     cube_core_num=self.cube_core_num)

    def set_option(self, option):
        for key, value in option.items():
            if value not in ACL_OPTIONS.get(key, (value,)):
                raise ValueError(f"value of {key} should be in {ACL_OPTIONS[key]} but got {value}")
            self.log.append(("option", key, value))

    def set_compile_mode(self, jit_compile=False):
        self.jit = jit_compile

    def is_jit_compile_false(self):
        self.contexts.add(self.current)  # torch_npu.npu._lazy_init() on the current card
        return not self.jit

    def synchronize(self, device=None):
        self.log.append(("synchronize", device))

    def Event(self, enable_timing=False):  # noqa: N802 - mirrors torch.npu.Event
        return FakeEvent(self)

    def reset_peak_memory_stats(self, device=None):
        pass

    def max_memory_allocated(self, device=None):
        return 0

    def max_memory_reserved(self, device=None):
        return 0

    def memory_allocated(self, device=None):
        return 0
