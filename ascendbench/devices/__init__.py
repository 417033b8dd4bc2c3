"""Device adapters (cpu, cuda, npu, auto) of ``conf/device``: :mod:`ascendbench.devices.adapter`."""
