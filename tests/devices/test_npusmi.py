"""npu-smi facts in the record: a fake ``npu-smi`` on PATH prints real ``npu-smi info`` outputs.

The two tables in ``data/`` are copied verbatim from youyve/nputop ``tests/test_libascend.py``
(commit 002c3d37): npu-smi 23.0.2.1 on two 910B2C cards with a 17 GB process on card 0, and npu-smi
25.2.0 on two dual-die Ascend910 cards (``Chip  Phy-ID`` column) with a process on the second die of
card 1.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from ascendbench.devices import runtime
from ascendbench.devices.adapter import DeviceAdapter
from ascendbench.devices.npu import card_facts, npu_smi_facts, parse

from helpers.npu_fake import FakeNpu

DATA = Path(__file__).parent / "data"


def _fake_npu_smi(tmp_path, monkeypatch, text):
    (tmp_path / "out.txt").write_text(text)
    script = tmp_path / "bin" / "npu-smi"
    script.parent.mkdir()
    script.write_text(f"#!/bin/sh\n[ \"$1\" = info ] && exec cat {tmp_path / 'out.txt'}\nexit 2\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")


def test_the_910b_table_parses_chips_hbm_and_processes():
    table = parse((DATA / "npu_smi_info_910b.txt").read_text())
    assert (table["version"] == "23.0.2.1"
            and [c["name"] for c in table["chips"]] == ["910B2C", "910B2C"])
    assert table["chips"][0] == {"npu": 0, "name": "910B2C", "health": "OK", "chip": 0,
                                 "bus_id": "0000:5A:00.0",
                                 "aicore_pct": 0, "hbm_used_mb": 20701, "hbm_total_mb": 65536}
    assert table["processes"] == [{"npu": 0, "chip": 0, "pid": 124528, "name": "python3.8",
                                   "memory_mb": 17400}]


def test_dual_die_cards_are_one_row_per_chip():
    table = parse((DATA / "npu_smi_info_dual_die.txt").read_text())
    assert [(c["npu"], c["chip"]) for c in table["chips"]] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    facts = card_facts(table, 3, own_pid=1)
    assert facts["card"]["hbm_used_mb"] == 10568 and facts["held_by_others_mb"] == 7746
    assert card_facts(table, 3, own_pid=990711)["held_by_others_mb"] == 0, (
        "our own process is not another")


def test_another_process_on_the_card_is_recorded_and_warned_about(tmp_path, monkeypatch, caplog):
    _fake_npu_smi(tmp_path, monkeypatch, (DATA / "npu_smi_info_910b.txt").read_text())
    monkeypatch.setitem(runtime.RUNTIMES, "npu",
                        runtime.RuntimeSpec(lambda: FakeNpu(), "missing", "no device"))
    monkeypatch.delenv("ASCEND_RT_VISIBLE_DEVICES", raising=False)
    with caplog.at_level(logging.WARNING):
        facts = DeviceAdapter("npu").info()["chip_options"]["npu_smi"]
    assert facts["card"]["bus_id"] == "0000:5A:00.0" and facts["held_by_others_mb"] == 17400
    assert "1 other process(es) hold 17400 MB on this card" in caplog.text
    # device.index 0 is now the second card: nobody there
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "1")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        facts = npu_smi_facts(0)
    assert (facts["card"]["bus_id"] == "0000:19:00.0" and facts["held_by_others_mb"] == 0
            and not caplog.text)


def test_an_unhealthy_card_is_warned_about(tmp_path, monkeypatch, caplog):
    text = (DATA / "npu_smi_info_910b.txt").read_text()
    text = text.replace("| OK            | 88.6", "| Alarm         | 88.6")
    _fake_npu_smi(tmp_path, monkeypatch, text)
    with caplog.at_level(logging.WARNING):
        facts = npu_smi_facts(0)
    assert facts["card"]["health"] == "Alarm" and "health is 'Alarm'" in caplog.text


def test_no_npu_smi_no_facts(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert npu_smi_facts(0) is None


@pytest.mark.parametrize("code", ["exit 3"])
def test_a_failing_npu_smi_is_said(tmp_path, monkeypatch, code):
    _fake_npu_smi(tmp_path, monkeypatch, "")
    (tmp_path / "bin" / "npu-smi").write_text(f"#!/bin/sh\necho 'dcmi init failed' >&2\n{code}\n")
    assert "exited 3: dcmi init failed" in npu_smi_facts(0)["error"]
