"""Facts ``npu-smi info`` gives about the card a job runs on: health, HBM in use, and who else holds memory there.

The table parsed is ``npu-smi info``'s default output (driver 23.0 to 25.x): per chip two rows
(``| NPU  Name | Health | Power(W) Temp(C) Hugepages-Usage(page) |`` then
``| Chip [Phy-ID] | Bus-Id | AICore(%) Memory-Usage(MB) HBM-Usage(MB) |``), then a process table
(``| NPU  Chip | Process id | Process name | Process memory(MB) |``, or ``No running processes found in NPU n``).
The format was taken from real outputs quoted in youyve/nputop ``tests/test_libascend.py`` (npu-smi 23.0.2.1 on
910B2C, 25.2.0 on a dual-die Ascend910, 25.2.3 on 910B3). Nothing is run when ``npu-smi`` is not on ``PATH``.

The job's card is the chip row at position ``ASCEND_RT_VISIBLE_DEVICES[index]`` (or ``index``) in table order, the
order in which the driver numbers devices; inside a container that sees only some cards the table shows only those.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from typing import Any

log = logging.getLogger(__name__)

TIMEOUT_S = 15.0
_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)")
_VERSION = re.compile(r"npu-smi\s+(\S+)")


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def parse(text: str) -> dict[str, Any]:
    """``{version, chips: [{npu, chip, name, health, bus_id, aicore_pct, hbm_used_mb, hbm_total_mb}], processes}``."""
    version = _VERSION.search(text)
    chips, processes, in_processes, pending = [], [], False, None
    for line in text.splitlines():
        if not line.lstrip().startswith("|"):
            continue
        if "Process id" in line:
            in_processes = True
            continue
        cells = _cells(line)
        if in_processes:
            if len(cells) == 4 and cells[1].isdigit():
                npu, chip = (cells[0].split() + ["0"])[:2]
                processes.append({"npu": int(npu), "chip": int(chip), "pid": int(cells[1]), "name": cells[2],
                                  "memory_mb": int(cells[3]) if cells[3].isdigit() else None})
            continue
        if len(cells) != 3:
            continue
        head = cells[0].split(maxsplit=1)
        if pending is None and len(head) == 2 and head[0].isdigit() and not head[1].isdigit():
            pending = {"npu": int(head[0]), "name": head[1], "health": cells[1]}
        elif pending is not None and head and head[0].isdigit():
            chips.append({**pending, **_usage(cells)})
            pending = None
    return {"version": version.group(1) if version else None, "chips": chips, "processes": processes}


def _usage(cells: list[str]) -> dict[str, Any]:
    pairs = _PAIR.findall(cells[2])
    aicore = cells[2].split()[0] if cells[2].split() else None
    hbm = pairs[1] if len(pairs) > 1 else pairs[0] if pairs else (None, None)
    return {"chip": int(cells[0].split()[0]), "bus_id": cells[1],
            "aicore_pct": int(aicore) if aicore and aicore.isdigit() else None,
            "hbm_used_mb": int(hbm[0]) if hbm[0] else None, "hbm_total_mb": int(hbm[1]) if hbm[1] else None}


def card_position(index: int, environ: dict[str, str] | None = None) -> int:
    """The job's chip row in ``npu-smi info`` order: ``ASCEND_RT_VISIBLE_DEVICES[index]``, else ``index``."""
    visible = (environ if environ is not None else os.environ).get("ASCEND_RT_VISIBLE_DEVICES", "")
    ids = [part.strip() for part in visible.split(",") if part.strip()]
    if index < len(ids) and ids[index].isdigit():
        return int(ids[index])
    return index


def card_facts(table: dict[str, Any], position: int, own_pid: int) -> dict[str, Any]:
    """The chip at ``position`` with the processes on it, and the memory other processes hold there."""
    if position >= len(table["chips"]):
        return {"npu_smi_version": table["version"], "card": None,
                "note": f"npu-smi lists {len(table['chips'])} chip(s); position {position} is not among them"}
    card = table["chips"][position]
    here = [p for p in table["processes"] if (p["npu"], p["chip"]) == (card["npu"], card["chip"])]
    others = [p for p in here if p["pid"] != own_pid]
    return {"npu_smi_version": table["version"], "card": card, "position": position, "processes": here,
            "other_processes": len(others), "held_by_others_mb": sum(p["memory_mb"] or 0 for p in others)}


def npu_smi_facts(index: int, runner: Any = subprocess.run) -> dict[str, Any] | None:
    """:func:`card_facts` of the job's card from a fresh ``npu-smi info``; ``None`` when npu-smi is absent.

    Logs a warning when other processes hold memory on the card (its latency and memory figures are then shared).
    """
    binary = shutil.which("npu-smi")
    if binary is None:
        return None
    try:
        done = runner([binary, "info"], capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"npu-smi info did not answer: {type(exc).__name__}: {exc}"}
    if done.returncode != 0:
        return {"error": f"npu-smi info exited {done.returncode}: {(done.stderr or done.stdout).strip()[:300]}"}
    facts = card_facts(parse(done.stdout), card_position(index), os.getpid())
    if facts.get("held_by_others_mb"):
        log.warning("npu-smi: %d other process(es) hold %d MB on this card (NPU %s chip %s): its timings and memory "
                    "are shared with them", facts["other_processes"], facts["held_by_others_mb"],
                    facts["card"]["npu"], facts["card"]["chip"])
    if facts.get("card") and facts["card"]["health"] != "OK":
        log.warning("npu-smi: this card's health is %r", facts["card"]["health"])
    return facts
