"""Directories named by Ascend environment variables, made to exist before ``torch_npu`` is imported.

CANN reads ``ASCEND_CACHE_PATH`` (operator compile cache), ``ASCEND_WORK_PATH`` (its working files) and
``ASCEND_PROCESS_LOG_PATH`` (plog) at ``import torch_npu``; a value pointing at a directory that does not
exist makes the import fail with error 500001 and no mention of the variable (the VideoFlexTok seed hit
it). The device adapter calls :func:`ensure_env_dirs` for ``device=npu`` right after applying
``device.env`` and before loading the runtime; ``python -m ascendbench.verify`` reports the same facts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Mapping

from ascendbench.errors import ConfigError

DIRECTORY_ENV = ("ASCEND_CACHE_PATH", "ASCEND_WORK_PATH", "ASCEND_PROCESS_LOG_PATH")


def env_dir_status(keys: Iterable[str] = DIRECTORY_ENV, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{key: 'unset' | 'exists: <dir>' | 'missing: <dir>' | 'not a directory: <path>'}`` (nothing created)."""
    environ = os.environ if environ is None else environ
    status = {}
    for key in keys:
        value = environ.get(key)
        if not value:
            status[key] = "unset"
            continue
        path = Path(value).expanduser()
        if path.is_dir():
            status[key] = f"exists: {path}"
        elif path.exists():
            status[key] = f"not a directory: {path}"
        else:
            status[key] = f"missing: {path}"
    return status


def ensure_env_dirs(keys: Iterable[str] = DIRECTORY_ENV, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Create every missing directory the ``keys`` point at; return ``{key: 'created: <dir>' | 'exists: <dir>'}``.

    Unset keys are left out. Raises:
        ConfigError: a value names a file, or the directory cannot be created (permissions, read-only
            or full disk), with the key, the path and how to fix it.
    """
    environ = os.environ if environ is None else environ
    done = {}
    for key, state in env_dir_status(keys, environ).items():
        if state == "unset":
            continue
        path = Path(environ[key]).expanduser()
        if state.startswith("exists"):
            done[key] = state
            continue
        if state.startswith("not a directory"):
            raise ConfigError(_refusal(key, path, "it is a file, not a directory"))
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            why = f"it does not exist and cannot be created ({exc.strerror or exc})"
            raise ConfigError(_refusal(key, path, why)) from exc
        done[key] = f"created: {path}"
    return done


def _refusal(key: str, path: Path, why: str) -> str:
    return (
        f"{key}={str(path)!r} cannot be used: {why}. torch_npu (CANN) fails at import with error 500001 when "
        f"{key} does not name a writable directory. Point it at a writable directory "
        f"(`+device.env.{key}=/tmp/ascend/{key.lower()}` or `export {key}=...`), or unset it."
    )
