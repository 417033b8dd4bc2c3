"""Device adapters (cpu, cuda, npu, auto) built from ``conf/device``."""

from ascendbench.devices.adapter import DeviceAdapter, auto_select, host_peak_rss_mb, host_rss_mb
from ascendbench.devices.runtime import RUNTIMES, load_runtime, probe

__all__ = ["DeviceAdapter", "auto_select", "host_peak_rss_mb", "host_rss_mb", "RUNTIMES", "load_runtime", "probe"]
