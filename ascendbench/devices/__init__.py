"""Device adapters (cpu, cuda, npu, auto) built from ``conf/device``: :mod:`ascendbench.devices.adapter`."""
