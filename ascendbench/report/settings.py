"""The report's options: ``conf/report.yaml`` plus ``key=value`` overrides from the command line."""

from __future__ import annotations

from typing import Iterable

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ascendbench.config import config_dir
from ascendbench.errors import ReportError

SETTINGS_FILE = "report.yaml"


def load_settings(overrides: Iterable[str] = ()) -> DictConfig:
    """The report options with dotted overrides applied (e.g. ``compare.noise=0.05``).

    Raises:
        ReportError: an override is malformed or names a key the options do not have.
    """
    settings = OmegaConf.load(config_dir() / SETTINGS_FILE)
    OmegaConf.set_struct(settings, True)
    overrides = list(overrides)
    try:
        return OmegaConf.merge(settings, OmegaConf.from_dotlist(overrides))
    except (OmegaConfBaseException, ValueError) as exc:
        raise ReportError(
            f"report option override {overrides} is not valid: {exc}. Keys and defaults are in "
            f"{config_dir() / SETTINGS_FILE}; write them as `--set section.key=value`, "
            "e.g. `--set compare.noise=0.05`."
        ) from None
