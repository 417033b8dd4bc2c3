"""Builders shared by the tests: tiny offline models, composed configs, and runs of the CLI.

Imported as ``from helpers import ...`` (``tests/`` is on pytest's ``pythonpath``); ``conftest.py``
files hold fixtures only, built on these.

* :mod:`helpers.models`: the tiny FLUX.2-style decoder (``TINY_FLUX2_ARCH``, ``build_tiny_flux2``)
  and ``same_weights``.
* :mod:`helpers.config`: ``compose_config`` (the app config as the CLI composes it) and ``run_job``.
* :mod:`helpers.app`: ``run_app`` runs ``python -m ascendbench`` in this process, ``run_cli`` in a
  subprocess; both return a :class:`~helpers.app.Result`.
"""

from helpers.app import TINY_RUN, Result, read_record, run_app, run_cli
from helpers.config import compose_config, release_card, run_job
from helpers.models import TINY_FLUX2_ARCH, build_tiny_flux2, same_weights

__all__ = [
    "TINY_FLUX2_ARCH",
    "TINY_RUN",
    "Result",
    "build_tiny_flux2",
    "compose_config",
    "read_record",
    "release_card",
    "run_app",
    "run_cli",
    "run_job",
    "same_weights",
]
