"""The ``ASCEND_*_PATH`` directories, made before torch_npu loads (CANN's 500001 names none)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from ascendbench.errors import ConfigError

DIRECTORY_ENV = ("ASCEND_CACHE_PATH", "ASCEND_WORK_PATH", "ASCEND_PROCESS_LOG_PATH")


def env_dir_status(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{key: 'unset' | 'exists: <dir>' | 'missing: <dir>' | 'not a directory: <path>'}``."""
    environ = os.environ if environ is None else environ
    status = {}
    for key in DIRECTORY_ENV:
        path = Path(environ[key]).expanduser() if environ.get(key) else None
        if path is None:
            status[key] = "unset"
        elif path.is_dir():
            status[key] = f"exists: {path}"
        else:
            status[key] = f"{'not a directory' if path.exists() else 'missing'}: {path}"
    return status


def ensure_env_dirs(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Create missing directories: ``{key: 'created: <dir>' | 'exists: <dir>'}`` or ConfigError."""
    environ = os.environ if environ is None else environ
    done = {}
    for key, state in env_dir_status(environ).items():
        path = Path(environ.get(key) or ".").expanduser()
        if state.startswith("not a directory"):
            raise ConfigError(_refusal(key, path, "it is a file, not a directory"))
        if state.startswith("missing"):
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                why = f"it does not exist and cannot be created ({exc.strerror or exc})"
                raise ConfigError(_refusal(key, path, why)) from exc
            state = f"created: {path}"
        if state != "unset":
            done[key] = state
    return done


def _refusal(key: str, path: Path, why: str) -> str:
    return (f"{key}={str(path)!r} cannot be used: {why}. torch_npu (CANN) fails at import with "
            f"error 500001 when {key} does not name a writable directory. Point it at a writable "
            f"directory (`+device.env.{key}=/tmp/ascend/{key.lower()}` or `export {key}=...`), or "
            "unset it.")
