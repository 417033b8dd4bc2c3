"""``python -m ascendbench.verify`` (``make verify``): is this host ready to validate a port?

* :mod:`ascendbench.verify.checks`: the checks, one ``PASS``/``WARN``/``FAIL`` line each, and ``main``;
* :mod:`ascendbench.verify.versions`: interpreter, library, CANN and driver versions (nothing imported);
* :mod:`ascendbench.verify.probe`: the device probe, run as ``python -m ascendbench.verify.probe`` in a
  child process under a timeout (importing ``torch_npu`` or a broken driver can hang or abort).
"""

from ascendbench.verify.checks import (
    Check,
    check_attention,
    check_cann,
    check_devices,
    check_driver,
    check_hub,
    check_libraries,
    check_lpips,
    check_python,
    check_torch_npu,
    format_checks,
    main,
    probe_devices,
    run_checks,
)

__all__ = [
    "Check", "check_attention", "check_cann", "check_devices", "check_driver", "check_hub", "check_libraries",
    "check_lpips", "check_python", "check_torch_npu", "format_checks", "main", "probe_devices", "run_checks",
]
