"""One Hydra initialisation per test module: ``compose_job(overrides)`` composes the app config
in-process."""

from __future__ import annotations

from typing import Iterable

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra


@pytest.fixture(scope="module")
def compose_job():
    """``compose_job(overrides, hydra=False)``: the composed config (with its ``hydra`` node if
    asked)."""
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="ascendbench.conf", version_base="1.3"):
        def _compose(overrides: Iterable[str] = (), hydra: bool = False):
            return compose(config_name="config", overrides=list(overrides),
                           return_hydra_config=hydra)

        yield _compose
    GlobalHydra.instance().clear()
