"""Keep ``import torch`` from importing torch_npu before the job's device settings are applied.

From torch 2.5, ``import torch`` loads every ``torch.backends`` entry point unless ``TORCH_DEVICE_BACKEND_AUTOLOAD``
is ``0`` (torch ``__init__.py``: ``_is_device_backend_autoload_enabled``, ``_import_device_backends``), and torch_npu
declares one from 2.5.1 (``torch_npu-2.5.1.dist-info/entry_points.txt``: ``[torch.backends] torch_npu =
torch_npu:_autoload``; 2.1.0.post8 has none). torch_npu reads ``ASCEND_*`` variables and creates its runtime state at
import, so an autoloaded torch_npu would never see ``device.env``, the created ``ASCEND_*`` directories or
``ASCEND_RT_VISIBLE_DEVICES``. :func:`defer_backend_autoload` runs when the ``ascendbench`` package is imported,
before any of its modules imports torch; torch_npu is then imported by the device adapter
(:mod:`ascendbench.devices.runtime`) right after those settings are applied. torch_npu itself sets the variable to
``0`` while it imports torch (2.5.1 ``torch_npu/__init__.py:11-13``), so nothing it needs depends on autoloading.
"""

from __future__ import annotations

import os
import sys
from typing import MutableMapping

AUTOLOAD_ENV = "TORCH_DEVICE_BACKEND_AUTOLOAD"
STATE: dict[str, object] = {}  # what defer_backend_autoload found: the value before, and whether torch was loaded


def defer_backend_autoload(environ: MutableMapping[str, str] | None = None) -> dict[str, object]:
    """Set ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` (inherited by worker processes); return what was there before.

    Returns ``{"before": <value or None>, "torch_already_imported": bool}``: when torch was imported before
    ascendbench (a script that imports torch first), the switch comes too late and the record says so.
    """
    environ = os.environ if environ is None else environ
    found = {"before": environ.get(AUTOLOAD_ENV), "torch_already_imported": "torch" in sys.modules}
    environ[AUTOLOAD_ENV] = "0"
    return found


def autoload_facts() -> dict[str, object]:
    """For the record: the switch's value now, what it was before ascendbench set it, and whether that was late."""
    return {AUTOLOAD_ENV: os.environ.get(AUTOLOAD_ENV), **STATE}
