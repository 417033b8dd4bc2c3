"""The chip's cube figures from CANN's own platform file, ``data/platform_config/<SoC>.ini``.

CANN ships one ini per SoC name (the names of torch_npu's ``NpuVariables.cpp:13-41``) under
``<toolkit>/<arch>-linux/data/platform_config/`` (older layouts: ``<toolkit>/data/platform_config/``); its
``[SoCInfo] ai_core_cnt`` / ``cube_core_cnt``, ``[AICoreSpec] cube_freq`` (MHz) and ``[DtypeMKN] Default`` (the cube's
M,N,K) give the dense float16/bfloat16 peak: cores x M*N*K x 2 x clock (:mod:`ascendbench.bench.peak`). Reading the
host's file means no figure is typed for the chip in hand; the table in ``conf/device/peak/`` is only the fallback.
"""

from __future__ import annotations

import configparser
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

TOOLKIT_ENV = ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH")
DEFAULT_ROOTS = ("/usr/local/Ascend/ascend-toolkit/latest", "/usr/local/Ascend/latest")
PATTERNS = ("data/platform_config/{soc}.ini", "*-linux/data/platform_config/{soc}.ini",
            "../data/platform_config/{soc}.ini", "../*-linux/data/platform_config/{soc}.ini")


def candidate_roots(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The CANN toolkit directories to look in: the toolkit variables ``set_env.sh`` exports, then the defaults."""
    environ = os.environ if environ is None else environ
    roots = [environ[key] for key in TOOLKIT_ENV if environ.get(key)]
    return [Path(root) for root in [*roots, *DEFAULT_ROOTS]]


def find_platform_ini(soc: str, roots: Iterable[Path] | None = None) -> Path | None:
    """The first ``<SoC>.ini`` under the toolkit roots; ``None`` when there is none (no CANN, or a name it lacks)."""
    if not soc or "/" in soc or soc.startswith("."):
        return None  # a runtime-reported name is data: it never leaves the platform_config directory
    for root in roots if roots is not None else candidate_roots():
        for pattern in PATTERNS:
            for path in sorted(root.glob(pattern.format(soc=soc))):
                if path.is_file():
                    return path.resolve()
    return None


def read_platform_ini(path: Path) -> dict[str, Any] | None:
    """``{path, cube_cores, cube_clock_ghz, macs_per_cycle}`` from one ini; ``None`` when a figure is missing."""
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
        cores = parser.getint("SoCInfo", "cube_core_cnt", fallback=None) or parser.getint("SoCInfo", "ai_core_cnt")
        freq_mhz = parser.getint("AICoreSpec", "cube_freq")
        mkn = [int(v) for v in parser.get("DtypeMKN", "Default", fallback="16,16,16").split(",")]
    except (configparser.Error, ValueError, OSError):
        return None
    if cores <= 0 or freq_mhz <= 0 or len(mkn) != 3:
        return None
    return {"path": str(path), "cube_cores": cores, "cube_clock_ghz": freq_mhz / 1000.0,
            "macs_per_cycle": mkn[0] * mkn[1] * mkn[2]}


def platform_figures(soc: str, roots: Iterable[Path] | None = None) -> dict[str, Any] | None:
    """:func:`read_platform_ini` of the chip's ini, or ``None`` where CANN has none on this host."""
    path = find_platform_ini(soc, roots)
    return read_platform_ini(path) if path else None
