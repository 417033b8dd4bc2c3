"""ascendbench: prove that a diffusion or video model ported to an accelerator is correct and fast.

One Hydra job composes a model, a device, a dtype, a preset and metrics, runs the model's task on a
CPU reference and on the device, and writes a ``record.json`` that reports are built from.

Importing the package switches off torch's device-backend autoloading (:mod:`ascendbench.backend_autoload`)
before any ascendbench module imports torch, so torch_npu is imported only once ``device.env`` is applied.
"""

from ascendbench.backend_autoload import STATE as _AUTOLOAD_STATE
from ascendbench.backend_autoload import defer_backend_autoload as _defer_backend_autoload

__version__ = "0.1.0"

_AUTOLOAD_STATE.update(_defer_backend_autoload())
