"""ascendbench: prove a ported diffusion/video model correct and fast (see backend_autoload)."""

from ascendbench.backend_autoload import STATE as _AUTOLOAD_STATE
from ascendbench.backend_autoload import defer_backend_autoload as _defer_backend_autoload

__version__ = "0.1.0"
SCHEMA_VERSION = 1  # of record.json: ascendbench.job.record writes it, a newer one is refused

_AUTOLOAD_STATE.update(_defer_backend_autoload())
