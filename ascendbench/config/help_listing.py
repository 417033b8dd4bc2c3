"""``--help`` lists the config groups once, not once per question Hydra asks about them.

Hydra 1.3's help (``Hydra.format_config_groups``, run twice: Hydra's groups and the app's) asks
``ConfigLoaderImpl.get_group_options`` three times per group, and each call deep-copies the whole config
repository (``CachingConfigRepository.__init__``) to answer from a fresh copy. With ascendbench's ~20
groups that is ~120 copies, seconds of ``--help`` spent copying the same unchanged repository. For a
``--help`` process only, the answers are memoised per (group, filter, config name, overrides): nothing
composes or mutates the repository between them, and the process exits after printing.
"""

from __future__ import annotations

import functools
from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl

_DEFAULT = object()  # "the caller left results_filter out": Hydra's own default applies
HELP_FLAGS = ("--help", "-h")


def wants_help(argv: list[str]) -> bool:
    """Whether this command line asks Hydra for the application's help."""
    return any(arg in HELP_FLAGS for arg in argv)


def memoise_group_options() -> bool:
    """Memoise ``ConfigLoaderImpl.get_group_options`` in this process; False when Hydra has no such method."""
    original = getattr(ConfigLoaderImpl, "get_group_options", None)
    if original is None or getattr(original, "_ascendbench_memo", False):
        return original is not None
    answers: dict[tuple, list[str]] = {}

    @functools.wraps(original)
    def get_group_options(self: Any, group_name: str, results_filter: Any = _DEFAULT, config_name: Any = None,
                          overrides: Any = None) -> list[str]:
        key = (id(self), group_name, results_filter, config_name, tuple(overrides or ()))
        if key not in answers:
            args = {} if results_filter is _DEFAULT else {"results_filter": results_filter}
            answers[key] = original(self, group_name, config_name=config_name, overrides=overrides, **args)
        return list(answers[key])

    get_group_options._ascendbench_memo = True  # type: ignore[attr-defined]
    ConfigLoaderImpl.get_group_options = get_group_options
    return True
