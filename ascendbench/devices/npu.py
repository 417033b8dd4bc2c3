"""The Ascend chip a job runs on: card, precision mode, formats, cube figures, npu-smi facts."""

from __future__ import annotations

import configparser
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterable, Mapping

from ascendbench.errors import ConfigError

log = logging.getLogger(__name__)

# Every SoC torch_npu orders below Ascend910B1 (NpuVariables.cpp): its default ACL_PRECISION_MODE
# there is allow_fp32_to_fp16, which runs float32 operators in float16.
PRE_A2_SOCS = ("Ascend910PremiumA", "Ascend910ProA", "Ascend910A", "Ascend910ProB", "Ascend910B",
               "Ascend310P1", "Ascend310P2", "Ascend310P3", "Ascend310P4", "Ascend310P5",
               "Ascend310P7")
PRECISION_MODES = ("allow_fp32_to_fp16", "must_keep_origin_dtype")
KEEP_DTYPE = "must_keep_origin_dtype"
TOOLKIT_ENV = ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH")
DEFAULT_ROOTS = ("/usr/local/Ascend/ascend-toolkit/latest", "/usr/local/Ascend/latest")
INI_PATTERNS = ("data/platform_config/{soc}.ini", "*-linux/data/platform_config/{soc}.ini",
                "../data/platform_config/{soc}.ini", "../*-linux/data/platform_config/{soc}.ini")
NPU_SMI_TIMEOUT_S = 15.0
_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)")
_VERSION = re.compile(r"npu-smi\s+(\S+)")


def apply_precision_mode(runtime: Any, chip: str, requested: str | None) -> dict[str, Any]:
    """Set ACL_PRECISION_MODE where the chip's default runs float32 in float16 (or as requested)."""
    if requested is not None and requested not in PRECISION_MODES:
        raise ConfigError(
            f"device.precision_mode={requested!r} is not an ACL_PRECISION_MODE; allowed: null "
            "(ascendbench keeps float32 float32: must_keep_origin_dtype on chips below "
            f"Ascend910B1, the chip default elsewhere), {', '.join(PRECISION_MODES)}. Fix the "
            "override, e.g. `device.precision_mode=null`.")
    pre_a2 = chip in PRE_A2_SOCS
    default = "allow_fp32_to_fp16" if pre_a2 else KEEP_DTYPE
    value = requested or (KEEP_DTYPE if pre_a2 else None)
    if value is None:
        return {"value": default, "set_by": f"chip default ({chip} is Ascend910B1 or newer)"}
    runtime.set_option({"ACL_PRECISION_MODE": value})
    why = ("device.precision_mode" if requested else f"ascendbench: {chip} defaults to "
           "allow_fp32_to_fp16, which runs float32 operators in float16")
    log.info("ACL_PRECISION_MODE=%s (%s)", value, why)
    return {"value": value, "set_by": why, "chip_default": default}


def apply_internal_format(runtime: Any, allow: bool | None) -> dict[str, Any]:
    """Set ``torch.npu.config.allow_internal_format`` when given; the setting and who chose it."""
    if allow is None:
        return {"value": None, "set_by": "chip default (torch_npu has no getter: A3 disable; A2 "
                "enable before the 26.0.0 branches, i.e. torch_npu <= 2.9.0 / CANN 8.5, disable "
                "from them)"}
    runtime.config.allow_internal_format = bool(allow)
    return {"value": bool(allow), "set_by": "device.allow_internal_format"}


def cube_cores(runtime: Any, index: int) -> int | None:
    """The card's AI-core count (``cube_core_num``, torch_npu's 7.2.0 branches on), else None."""
    try:
        value = getattr(runtime.get_device_properties(index), "cube_core_num", None)
    except Exception:  # noqa: BLE001 - an older or partial runtime: unknown, not an error
        return None
    return int(value) if isinstance(value, int) and value > 0 else None


def find_platform_ini(soc: str, roots: Iterable[Path] | None = None) -> Path | None:
    """The first ``<SoC>.ini`` under the CANN toolkit roots; ``None`` when there is none."""
    if not soc or "/" in soc or soc.startswith("."):
        return None  # a runtime-reported name is data: it never leaves platform_config/
    if roots is None:
        env = [os.environ[key] for key in TOOLKIT_ENV if os.environ.get(key)]
        roots = [Path(root) for root in [*env, *DEFAULT_ROOTS]]
    return next((path.resolve() for root in roots for pattern in INI_PATTERNS
                 for path in sorted(root.glob(pattern.format(soc=soc))) if path.is_file()), None)


def platform_figures(soc: str, roots: Iterable[Path] | None = None) -> dict[str, Any] | None:
    """``{path, cube_cores, cube_clock_ghz, macs_per_cycle}`` from the chip's CANN ini, or None."""
    path = find_platform_ini(soc, roots)
    if path is None:
        return None
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
        cores = (parser.getint("SoCInfo", "cube_core_cnt", fallback=None)
                 or parser.getint("SoCInfo", "ai_core_cnt"))
        freq_mhz = parser.getint("AICoreSpec", "cube_freq")
        mkn = [int(v) for v in parser.get("DtypeMKN", "Default", fallback="16,16,16").split(",")]
    except (configparser.Error, ValueError, OSError):
        return None
    if cores <= 0 or freq_mhz <= 0 or len(mkn) != 3:
        return None
    return {"path": str(path), "cube_cores": cores, "cube_clock_ghz": freq_mhz / 1000.0,
            "macs_per_cycle": mkn[0] * mkn[1] * mkn[2]}


def parse(text: str) -> dict[str, Any]:
    """``npu-smi info``'s default table (driver 23.0 to 25.x): ``{version, chips, processes}``."""
    version = _VERSION.search(text)
    chips, processes, in_processes, pending = [], [], False, None
    for line in text.splitlines():
        if not line.lstrip().startswith("|"):
            continue
        if "Process id" in line:
            in_processes = True
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if in_processes:
            if len(cells) == 4 and cells[1].isdigit():
                npu, chip = (cells[0].split() + ["0"])[:2]
                memory = int(cells[3]) if cells[3].isdigit() else None
                processes.append({"npu": int(npu), "chip": int(chip), "pid": int(cells[1]),
                                  "name": cells[2], "memory_mb": memory})
            continue
        head = cells[0].split(maxsplit=1) if len(cells) == 3 else []
        if pending is None and len(head) == 2 and head[0].isdigit() and not head[1].isdigit():
            pending = {"npu": int(head[0]), "name": head[1], "health": cells[1]}
        elif pending is not None and head and head[0].isdigit():
            chips.append({**pending, **_usage(cells)})
            pending = None
    return {"version": version.group(1) if version else None, "chips": chips,
            "processes": processes}


def _usage(cells: list[str]) -> dict[str, Any]:
    pairs = _PAIR.findall(cells[2])
    aicore = cells[2].split()[0] if cells[2].split() else None
    hbm = pairs[1] if len(pairs) > 1 else pairs[0] if pairs else (None, None)
    return {"chip": int(cells[0].split()[0]), "bus_id": cells[1],
            "aicore_pct": int(aicore) if aicore and aicore.isdigit() else None,
            "hbm_used_mb": int(hbm[0]) if hbm[0] else None,
            "hbm_total_mb": int(hbm[1]) if hbm[1] else None}


def card_facts(table: dict[str, Any], position: int, own_pid: int) -> dict[str, Any]:
    """The chip at ``position`` with its processes, and the memory other processes hold there."""
    if position >= len(table["chips"]):
        return {"npu_smi_version": table["version"], "card": None,
                "note": f"npu-smi lists {len(table['chips'])} chip(s); position {position} is not "
                        "among them"}
    card = table["chips"][position]
    here = [p for p in table["processes"] if (p["npu"], p["chip"]) == (card["npu"], card["chip"])]
    others = [p for p in here if p["pid"] != own_pid]
    return {"npu_smi_version": table["version"], "card": card, "position": position,
            "processes": here, "other_processes": len(others),
            "held_by_others_mb": sum(p["memory_mb"] or 0 for p in others)}


def npu_smi_facts(index: int) -> dict[str, Any] | None:
    """:func:`card_facts` of the job's card from ``npu-smi info`` (None without npu-smi)."""
    binary = shutil.which("npu-smi")
    if binary is None:
        return None
    try:
        done = subprocess.run([binary, "info"], capture_output=True, text=True,
                              timeout=NPU_SMI_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"npu-smi info did not answer: {type(exc).__name__}: {exc}"}
    if done.returncode != 0:
        output = (done.stderr or done.stdout).strip()[:300]
        return {"error": f"npu-smi info exited {done.returncode}: {output}"}
    visible = [p.strip() for p in os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "").split(",")]
    visible = [p for p in visible if p]
    position = int(visible[index]) if index < len(visible) and visible[index].isdigit() else index
    facts = card_facts(parse(done.stdout), position, os.getpid())
    if facts.get("held_by_others_mb"):
        log.warning("npu-smi: %d other process(es) hold %d MB on this card (NPU %s chip %s): its "
                    "timings and memory are shared with them", facts["other_processes"],
                    facts["held_by_others_mb"], facts["card"]["npu"], facts["card"]["chip"])
    if facts.get("card") and facts["card"]["health"] != "OK":
        log.warning("npu-smi: this card's health is %r", facts["card"]["health"])
    return facts


def chip_options(runtime: Any, index: int, settings: Mapping[str, Any]) -> dict[str, Any]:
    """Apply the chip options; what is in force and the chip's facts for ``env.device``."""
    chip = str(runtime.get_device_name(index))
    return {"precision_mode": apply_precision_mode(runtime, chip, settings.get("precision_mode")),
            "allow_internal_format": apply_internal_format(
                runtime, settings.get("allow_internal_format")),
            "cube_core_num": cube_cores(runtime, index),
            "platform_config": platform_figures(chip),
            "npu_smi": npu_smi_facts(index)}
