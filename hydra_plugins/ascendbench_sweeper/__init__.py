"""Registers ascendbench's sweeper with Hydra (``hydra/sweeper=ascendbench``, the default of
``conf/config.yaml``): Hydra instantiates sweepers from the ``hydra_plugins`` package only."""

from ascendbench.job.sweeper import ComposeOnceSweeper


class AscendbenchSweeper(ComposeOnceSweeper):
    """Hydra's basic sweep, each job's config composed once: :mod:`ascendbench.job.sweeper`."""
