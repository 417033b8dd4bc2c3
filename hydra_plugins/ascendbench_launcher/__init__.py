"""Registers ascendbench's launcher with Hydra (``hydra/launcher=ascendbench``, the default of
``conf/config.yaml``): Hydra instantiates launchers from the ``hydra_plugins`` package only."""

from ascendbench.job import launcher


class AscendbenchLauncher(launcher.ComposeOnceLauncher):
    """Hydra's basic launcher, each job's config composed once: :mod:`ascendbench.job.launcher`."""
