"""ascendbench's Hydra configuration, shipped as the package ``ascendbench.conf`` (``pkg://ascendbench.conf``)."""
