"""Card selection and the Ascend chip options a job sets, each checked against torch_npu's own source.

* **The card** (:func:`select_card`): ``torch.npu.Event.record()`` and ``torch.cuda.Event.record()`` record on
  the *current* device's stream, and torch_npu's ``get_device_name(i)`` ignores ``i`` and names the current
  device (torch_npu 2.9.0 ``torch_npu/npu/__init__.py:458-462``: ``torch_npu._C._npu_getDeviceName()``);
  ``is_jit_compile_false()`` initialises the current device (``torch_npu/npu/npu_config.py:147-149`` in 2.9.0,
  ``:132-134`` in 2.5.1: ``torch_npu.npu._lazy_init()``). So ``set_device(index)`` comes before anything else
  touches the runtime, or ``device.index=1`` times card 0 and opens a context on card 0.
* **ACL_PRECISION_MODE** (:func:`apply_precision_mode`): torch_npu sets ``allow_fp32_to_fp16`` (float32 operators
  silently run in float16) on every chip below ``Ascend910B1`` and ``must_keep_origin_dtype`` from it on
  (``torch_npu/csrc/framework/LazyInitAclops.cpp:213-223`` on master, ``csrc/core/npu/sys_ctrl/npu_sys_ctrl.cpp:244``
  on v2.1.0-6.0.0); the chip order is ``csrc/core/npu/NpuVariables.cpp:13-41``. ascendbench sets
  ``must_keep_origin_dtype`` on those chips, so float32 means float32, unless ``device.precision_mode`` says otherwise.
* **allow_internal_format** (:func:`apply_internal_format`): ``torch.npu.config.allow_internal_format = bool``
  (``torch_npu/npu/npu_config.py:152-156`` in 2.9.0; no getter). The chip default differs: up to the 7.3.0
  branches (torch_npu 2.9.0, CANN 8.5) only A3 (``>= Ascend910_9391``) defaults to ``disable``; from the 26.0.0
  branches (2.9.0.post2, CANN 9.0) A2 (``Ascend910B1`` ..) does too (``csrc/core/npu/sys_ctrl/npu_sys_ctrl.cpp``,
  ``SetDefaultAllowInternalFromatDisable`` and its caller, on v2.9.0-7.3.0 vs v2.9.0-26.0.0).
"""

from __future__ import annotations

import logging
from typing import Any

from ascendbench.errors import ConfigError

log = logging.getLogger(__name__)

# Every SoC name torch_npu orders below Ascend910B1 (NpuVariables.cpp:13-24, master and v2.1.0-6.0.0 alike): on these
# torch_npu's default ACL_PRECISION_MODE is allow_fp32_to_fp16.
PRE_A2_SOCS = ("Ascend910PremiumA", "Ascend910ProA", "Ascend910A", "Ascend910ProB", "Ascend910B",
               "Ascend310P1", "Ascend310P2", "Ascend310P3", "Ascend310P4", "Ascend310P5", "Ascend310P7")
PRECISION_MODES = ("allow_fp32_to_fp16", "must_keep_origin_dtype")  # npu_config.py:22 (2.9.0), :15 (2.1.0.post8)
KEEP_DTYPE = "must_keep_origin_dtype"


def select_card(runtime: Any, index: int) -> int:
    """Make card ``index`` the runtime's current device (``set_device``) and return it.

    Called right after the runtime loads, before events, streams, the compile-mode probe or the device name.
    """
    runtime.set_device(index)
    return index


def check_precision_mode(value: str | None) -> None:
    """Refuse a ``device.precision_mode`` torch_npu would refuse (its ``set_option`` raises ValueError)."""
    if value is not None and value not in PRECISION_MODES:
        raise ConfigError(
            f"device.precision_mode={value!r} is not an ACL_PRECISION_MODE; allowed: null (ascendbench keeps float32 "
            f"float32: must_keep_origin_dtype on chips below Ascend910B1, the chip default elsewhere), "
            f"{', '.join(PRECISION_MODES)}. Fix the override, e.g. `device.precision_mode=null`.")


def apply_precision_mode(runtime: Any, chip: str, requested: str | None) -> dict[str, Any]:
    """Set ACL_PRECISION_MODE where the chip's default would run float32 in float16; return what is in force.

    ``requested`` (``device.precision_mode``) wins; ``None`` sets ``must_keep_origin_dtype`` on the chips of
    :data:`PRE_A2_SOCS` and leaves the others at their default, which already is ``must_keep_origin_dtype``.
    """
    check_precision_mode(requested)
    pre_a2 = chip in PRE_A2_SOCS
    default = "allow_fp32_to_fp16" if pre_a2 else KEEP_DTYPE
    value = requested or (KEEP_DTYPE if pre_a2 else None)
    if value is None:
        return {"value": default, "set_by": f"chip default ({chip} is Ascend910B1 or newer)"}
    runtime.set_option({"ACL_PRECISION_MODE": value})
    why = ("device.precision_mode" if requested else
           f"ascendbench: {chip} defaults to allow_fp32_to_fp16, which runs float32 operators in float16")
    log.info("ACL_PRECISION_MODE=%s (%s)", value, why)
    return {"value": value, "set_by": why, "chip_default": default}


def apply_internal_format(runtime: Any, allow: bool | None) -> dict[str, Any]:
    """Set ``torch.npu.config.allow_internal_format`` when given; return the setting and who chose it."""
    if allow is None:
        return {"value": None, "set_by": "chip default (torch_npu has no getter: A3 disable; A2 enable before the "
                                         "26.0.0 branches, i.e. torch_npu <= 2.9.0 / CANN 8.5, disable from them)"}
    runtime.config.allow_internal_format = bool(allow)
    return {"value": bool(allow), "set_by": "device.allow_internal_format"}


def cube_cores(runtime: Any, index: int) -> int | None:
    """The card's AI-core (cube) count: ``get_device_properties(i).cube_core_num``, else None.

    The field exists from the 7.2.0 branches (torch_npu 2.1.0.post17, 2.6.0.post3, 2.7.1, 2.8.0 and newer:
    ``torch_npu/csrc/npu/Module.cpp:144`` on v2.9.0-7.3.0), not in 2.5.1 or 2.6.0 (v2.6.0-7.1.0).
    """
    try:
        value = getattr(runtime.get_device_properties(index), "cube_core_num", None)
    except Exception:  # noqa: BLE001 - an older or partial runtime: the count is unknown, not an error
        return None
    return int(value) if isinstance(value, int) and value > 0 else None
