"""device.env and the ASCEND_* directories are in os.environ before torch_npu is first imported.

A stand-in ``torch_npu`` distribution is put on ``PYTHONPATH`` with the ``torch.backends`` entry
point the real wheel declares from 2.5.1 (``torch_npu-2.5.1.dist-info/entry_points.txt``), so
torch's own autoloading finds it exactly as on an Ascend host. Its import records ``os.environ`` and
reports no NPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ascendbench.devices import runtime
from ascendbench.devices.adapter import auto_select
from ascendbench.errors import DeviceUnavailableError

from helpers import TINY_RUN, read_record, run_cli

FAKE_INIT = '''
import json, os, sys
import torch
with open(os.environ["FAKE_TORCH_NPU_LOG"], "a") as log:
    log.write(json.dumps({"MARK": os.environ.get("ASCENDBENCH_TEST_MARK"),
                          "cache_dir_exists": os.path.isdir(os.environ.get("ASCEND_CACHE_PATH")
                                                            or "/nonexistent"),
                          "visible": os.environ.get("ASCEND_RT_VISIBLE_DEVICES")}) + "\\n")
class _Npu:
    def is_available(self): return False
    def device_count(self): return 0
torch.npu = _Npu()
def _autoload():
    pass
'''


def _fake_torch_npu(root: Path) -> Path:
    (root / "torch_npu").mkdir(parents=True)
    (root / "torch_npu" / "__init__.py").write_text(FAKE_INIT)
    info = root / "torch_npu-2.5.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch_npu\nVersion: 2.5.1\n")
    (info / "entry_points.txt").write_text("[torch.backends]\ntorch_npu = torch_npu:_autoload\n")
    return root


def _env(tmp_path: Path) -> dict[str, str]:
    return {"PYTHONPATH": str(_fake_torch_npu(tmp_path / "site")),
            "FAKE_TORCH_NPU_LOG": str(tmp_path / "imports"),
            # as on a host: autoloading on until ascendbench is imported
            "TORCH_DEVICE_BACKEND_AUTOLOAD": "1"}


def _imports(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "imports").read_text().splitlines()]


def _overrides(tmp_path: Path, device: str) -> list[str]:
    return ["model=tiny_flux2_decoder", *TINY_RUN[:-1], f"device={device}",
            "+device.env.ASCENDBENCH_TEST_MARK=set",
            f"+device.env.ASCEND_CACHE_PATH={tmp_path / 'made' / 'cache'}",
            # auto.yaml has env: {}
            f"{'+' if device == 'auto' else ''}device.env.ASCEND_RT_VISIBLE_DEVICES=1"]


def test_device_env_is_in_place_when_torch_npu_is_first_imported(tmp_path):
    result = run_cli(_overrides(tmp_path, "npu"), cwd=tmp_path, env=_env(tmp_path),
                     out_dir=tmp_path / "job")
    assert result.returncode == 1, result.output
    assert _imports(tmp_path) == [{"MARK": "set", "cache_dir_exists": True, "visible": "1"}]
    record = read_record(tmp_path / "job")
    assert record["error"]["reason"] == "device_unavailable"


def _python(tmp_path: Path, code: str) -> subprocess.CompletedProcess:
    # other tests' device.env
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND")}
    env = {**inherited, **_env(tmp_path)}
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, env=env,
                          timeout=300)


def test_device_auto_applies_env_before_its_probe(tmp_path, monkeypatch):
    """The probe's import of the runtime (torch_npu, on a host) sees device.env and the created
    directories."""
    seen = []

    def load():
        seen.append({k: os.environ.get(k) for k in ("ASCENDBENCH_TEST_MARK",
                                                    "ASCEND_RT_VISIBLE_DEVICES")}
                    | {"cache_dir_exists": (tmp_path / "made").is_dir()})
        raise ImportError("stand-in torch_npu: no CANN here")

    monkeypatch.setitem(runtime.RUNTIMES, "npu", runtime.RuntimeSpec(load, "missing", "no device"))
    for key in ("ASCENDBENCH_TEST_MARK", "ASCEND_RT_VISIBLE_DEVICES", "ASCEND_CACHE_PATH"):
        monkeypatch.setenv(key, "")  # recorded, so what auto_select sets is undone after the test
        monkeypatch.delenv(key)
    env = {"ASCENDBENCH_TEST_MARK": "set", "ASCEND_RT_VISIBLE_DEVICES": "1",
           "ASCEND_CACHE_PATH": str(tmp_path / "made")}
    with pytest.raises(DeviceUnavailableError, match="device=auto found none"):
        auto_select(order=["npu"], env=env)
    assert seen == [{"ASCENDBENCH_TEST_MARK": "set", "ASCEND_RT_VISIBLE_DEVICES": "1",
                     "cache_dir_exists": True}]


def test_an_early_import_is_seen_and_warned_about(tmp_path):
    """The planted fault: torch imported before ascendbench with autoloading on: torch_npu arrives
    before the env."""
    done = _python(tmp_path, "import torch\nimport ascendbench.devices.adapter as d\ntry:\n"
                             "    d.DeviceAdapter('npu', env={'ASCENDBENCH_TEST_MARK': 'set'})\n"
                             "except Exception as exc:\n    print(exc)")
    assert _imports(tmp_path) == [{"MARK": None, "cache_dir_exists": False, "visible": None}]
    assert "torch_npu was imported before device.env" in done.stderr, done.stderr[-2000:]
