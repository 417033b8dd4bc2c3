"""scripts/npu_manifest.py on a small wheel written here: what it reads from sources and shared
objects."""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "npu_manifest.py"
spec = importlib.util.spec_from_file_location("npu_manifest", SCRIPT)
npu_manifest = importlib.util.module_from_spec(spec)
spec.loader.exec_module(npu_manifest)

SOURCES = {
    "torch_npu/__init__.py": "import os\nfrom . import npu\nLEVEL = "
                             "os.environ.get('TORCH_NPU_LOGS')\n",
    "torch_npu/npu/__init__.py": ("from .memory import *\nfrom .streams import Event\nfrom . "
                                  "import npu_config\n"
                                  "__all__ = ['synchronize', 'Event', 'max_memory_allocated', "
                                  "'matmul']\n"
                                  "matmul = npu_config._Matmul()\n"
                                  "def synchronize(device=None):\n    pass\n"
                                  "if os.getenv('SET_NPU_DEVICE'):\n    def _private():\n        "
                                  "pass\n"),
    "torch_npu/npu/memory.py": "__all__ = ['max_memory_allocated']\ndef "
                               "max_memory_allocated(device=None): pass\n"
                               "def not_exported(): pass\n",
    "torch_npu/npu/streams.py": "class Event:\n    def record(self, stream=None): pass\n",
    "torch_npu/npu/npu_config.py": ("class _Matmul:\n    def __getattr__(cls, name):\n"
                                    "        if name == 'allow_hf32':\n            return True\n"),
    "torch_npu/profiler/__init__.py": ("from torch_npu._C._profiler import ProfilerActivity\n"
                                       "from .profiler import profile\n"
                                       "ALL = [ProfilerActivity.CPU, ProfilerActivity.NPU]\n"),
    "torch_npu/profiler/profiler.py": ("class _KinetoProfile:\n    def export_chrome_trace(self, "
                                       "output_path): pass\n"
                                       "class profile(_KinetoProfile):\n"
                                       "    def __init__(self, *, activities=None):\n        "
                                       "self.stopped = False\n"
                                       "    def stop(self): pass\n"),
    "torch_npu/profiler/analysis/prof_view/_operator_view_parser.py": (
        "class OperatorViewParser:\n    OPERATOR_HEADERS = ['Name', 'Input Shapes']\n"),
}
SO = (b"\0CAUTION: The operator '\0' is not currently supported on the NPU backend.\0NPU out of "
      b"memory. Tried to "
      b"allocate \0total_memory\0PYTORCH_NPU_ALLOC_CONF\0npu_fusion_attention(Tensor query, Tensor "
      b"key) -> Tensor\0")


def test_the_manifest_of_a_wheel(tmp_path):
    wheel = tmp_path / "torch_npu-9.9.0-cp310-cp310-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in SOURCES.items():
            archive.writestr(path, text)
        archive.writestr("torch_npu/lib/libtorch_npu.so", SO)
    manifest = npu_manifest.build(wheel)
    assert manifest["torch_npu"] == "9.9.0" and len(manifest["sha256"]) == 64
    npu = manifest["modules"]["torch_npu.npu"]["names"]
    assert set(npu) >= {"synchronize", "Event", "max_memory_allocated", "matmul", "npu_config"}
    assert "not_exported" not in npu and "_private" not in npu, (
        "star imports follow __all__; private names left out")
    assert npu["synchronize"]["signature"] == "(device=None)"
    assert npu["matmul"]["instance"]["attributes"] == ["allow_hf32"], "served by __getattr__"
    profile = manifest["modules"]["torch_npu.profiler.profiler"]["names"]["profile"]
    assert set(profile["methods"]) == {"__init__", "stop"} and profile["attributes"] == ["stopped"]
    assert profile["inherited"] == {"_KinetoProfile": ["export_chrome_trace"]}
    assert "torch_npu.profiler.analysis.prof_view._operator_view_parser" not in manifest["modules"]
    assert manifest["profiler"]["operator_details.csv"]["value"] == ["Name", "Input Shapes"]
    activities = {"torch_npu._C._profiler.ProfilerActivity": ["CPU", "NPU"]}
    assert manifest["extension_attributes"] == activities
    assert manifest["env_vars"] == ["SET_NPU_DEVICE", "TORCH_NPU_LOGS"]
    assert (manifest["so_env_vars"] == ["PYTORCH_NPU_ALLOC_CONF"]
            and manifest["ops"] == ["npu_fusion_attention"])
    messages = manifest["messages"]
    assert messages["fallback_prefix"]["present"] and messages["oom_tried_to_allocate"]["present"]
    assert (not messages["c10_OutOfMemoryError"]["present"]
            and not messages["fallback_will_fall_back"]["present"])
    assert manifest["device_property_fields"] == ["total_memory"]
