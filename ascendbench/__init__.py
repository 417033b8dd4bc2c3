"""ascendbench: prove that a diffusion or video model ported to an accelerator is correct and fast.

Importing the package switches off torch's device-backend autoloading (:mod:`.backend_autoload`)
before any ascendbench module imports torch: torch_npu is imported once ``device.env`` is applied.
"""

from ascendbench.backend_autoload import STATE as _AUTOLOAD_STATE
from ascendbench.backend_autoload import defer_backend_autoload as _defer_backend_autoload

__version__ = "0.1.0"

_AUTOLOAD_STATE.update(_defer_backend_autoload())
