"""Keep ``import torch`` from autoloading torch_npu before ``device.env`` applies."""

from __future__ import annotations

import os
import sys
from typing import MutableMapping

AUTOLOAD_ENV = "TORCH_DEVICE_BACKEND_AUTOLOAD"
STATE: dict[str, object] = {}  # what defer_backend_autoload found: the value before, torch loaded


def defer_backend_autoload(environ: MutableMapping[str, str] | None = None) -> dict[str, object]:
    """Set ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``; what was there before, whether torch was loaded."""
    environ = os.environ if environ is None else environ
    found = {"before": environ.get(AUTOLOAD_ENV), "torch_already_imported": "torch" in sys.modules}
    environ[AUTOLOAD_ENV] = "0"
    return found


def autoload_facts() -> dict[str, object]:
    """For the record: the switch's value now, its value before ascendbench, whether too late."""
    return {AUTOLOAD_ENV: os.environ.get(AUTOLOAD_ENV), **STATE}
