"""A stand-in for ``torch_npu`` built from the checked-in manifest of a real wheel
(tests/devices/npu_manifest).

``install(monkeypatch, version)`` puts ``torch_npu``, ``torch_npu.npu``, ``torch_npu.npu.utils`` and
``torch_npu.profiler`` into ``sys.modules`` and ``torch.npu``, as ``import torch_npu`` does. Each
module exposes only names the manifest lists for that module of that wheel: any other attribute
raises ``AttributeError``, and a name the manifest has but this fake gives no behaviour raises
``NotImplementedError`` when called. Each behaviour below copies the torch_npu 2.9.0 wheel
(``torch_npu-2.9.0-cp310-cp310-manylinux_2_28_x86_64.whl``; the same files in 2.1.0.post17, 2.5.1
and 2.14.0, whose manifests give the texts and names per version); the paths are inside the wheel:

* out of memory: ``torch_npu/lib/libtorch_npu.so`` holds "NPU out of memory. Tried to allocate " and
  " reserved in total by PyTorch)" (NPUCachingAllocator.cpp); no ``c10::OutOfMemoryError`` type in
  the wheels built for CANN 8.x, so it is a plain ``RuntimeError`` there, ``torch.OutOfMemoryError``
  where the manifest finds the type (``messages.c10_OutOfMemoryError``);
* CPU fallback: the CAUTION text of ``libtorch_npu.so`` ("CAUTION: The operator '" + op + "' is not
  currently supported on the NPU backend and will fall back to run on the CPU."), written by the C++
  log to fd 2 once per operator per process (TORCH_NPU_WARN_ONCE), never to Python ``warnings``;
* runtime: ``torch_npu/npu/__init__.py`` (``torch.npu``; ``matmul``/``conv`` are
  ``npu_config._allowHF32Matmul`` objects serving ``allow_hf32``), ``torch_npu/npu/streams.py``
  (``Event``), ``torch_npu/npu/memory.py`` (the counters take ``device=None``),
  ``torch_npu/npu/npu_config.py`` (``set_compile_mode``, ``is_jit_compile_false``),
  ``torch_npu/npu/utils.py`` (``get_cann_version``); device properties: the fields bound in
  ``libtorch_npu.so``; ``torch_npu.npu_*`` operators: the schemas registered in ``libtorch_npu.so``
  (present, not implemented);
* profiler: ``torch_npu/profiler/profiler.py`` (``profile``'s methods,
  ``tensorboard_trace_handler``), ``torch_npu/profiler/_profiler_path_creator.py``
  (``{worker}_{pid}_{time}_ascend_pt``), and the columns of
  ``analysis/prof_view/_operator_view_parser.py``, ``analysis/prof_common_func/_csv_headers.py`` and
  ``analysis/prof_bean/_op_statistic_bean.py`` under ``ASCEND_PROFILER_OUTPUT`` (``_constant.py``).
  The operators and their times come from ``torch.profiler`` on the host (the stand-in device).
"""

from __future__ import annotations

import csv
import importlib.machinery
import json
import multiprocessing
import os
import re
import socket
import sys
import time
import types
import warnings
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import torch

from ascendbench.devices.adapter import DeviceAdapter

MANIFESTS = Path(__file__).resolve().parents[1] / "devices" / "npu_manifest"
DEFAULT_VERSION = "2.9.0"
TOTAL_MEMORY = 64 * 2**30  # this fake card's HBM (an Atlas 800T A2 card's 64 GB)
_WARNED_OPS: set[str] = set()  # TORCH_NPU_WARN_ONCE: per process, whichever job triggered it


def manifest_versions() -> list[str]:
    """The torch_npu versions with a checked-in manifest."""
    return sorted(p.stem.removeprefix("torch_npu-") for p in MANIFESTS.glob("torch_npu-*.json"))


def load_manifest(version: str) -> dict[str, Any]:
    """The manifest of one torch_npu wheel."""
    return json.loads((MANIFESTS / f"torch_npu-{version}.json").read_text())


class ManifestModule(types.ModuleType):
    """A module that has exactly the names its manifest entry lists; behaviours are set with
    :meth:`provide`."""

    def __init__(self, name: str, entry: dict[str, Any], version: str, ops: list[str] = ()) -> None:
        super().__init__(name)
        # find_spec() finds it
        self.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        # ops: torch_npu.npu_* bound from C++
        self.__dict__["_listed"] = set(entry["names"]) | set(ops)
        self.__dict__["_version"] = version

    def provide(self, **behaviours: Any) -> None:
        """Give the listed names a behaviour; those this version of the module lacks are left out
        (absent)."""
        self.__dict__.update({k: v for k, v in behaviours.items() if k in self._listed})

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") or attr not in self._listed:
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r} (torch_npu "
                                 f"{self._version})")

        def unimplemented(*args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError(f"{self.__name__}.{attr} exists in torch_npu "
                                      f"{self._version}; the fake "
                                      "gives it no behaviour")
        return unimplemented


# What the getters of torch_npu/npu/npu_config.py return for an option never set (2.9.0:
# _allowHF32Matmul.__getattr__ lines 172-181: allow_hf32 False, cube_math_type None;
# _allowHF32Conv.__getattr__ lines 192-195: allow_hf32 True, "" or unset reads as enabled).
UNSET = {"npu_config._allowHF32Matmul": {"allow_hf32": False, "cube_math_type": None},
         "npu_config._allowHF32Conv": {"allow_hf32": True}}


class _Options:
    """``torch.npu.matmul`` / ``torch.npu.conv``: the attributes the manifest's class serves
    (allow_hf32, cube_math_type from 2.9), read back as the wheel's getters read the option."""

    def __init__(self, attributes: list[str], unset: dict[str, Any] | None = None) -> None:
        self.__dict__["_allowed"] = set(attributes)
        self.__dict__["values"] = {}
        self.__dict__["_unset"] = unset or {}

    def __getattr__(self, attr: str) -> Any:
        if attr not in self._allowed:
            raise AttributeError(attr)
        return self.values.get(attr, self._unset.get(attr))

    def __setattr__(self, attr: str, value: Any) -> None:
        if attr not in self._allowed:
            raise AttributeError(attr)
        self.values[attr] = value


class FakeNpu:
    """The state behind the fake modules: devices, memory counters, compile mode, armed faults,
    calls seen."""

    def __init__(self, version: str, device_name: str = "Ascend910B3", devices: int = 2) -> None:
        self.version, self.manifest = version, load_manifest(version)
        self.device_name, self.devices = device_name, devices
        self.calls: list[tuple[str, Any]] = []
        self.jit_compile = False
        self.peak_bytes = self.allocated_bytes = 0
        # bytes a synchronize reports it failed to allocate
        self.oom_on_synchronize: int | None = None
        self.modules = self._modules()

    def messages(self, key: str) -> str:
        """A message template of the wheel's shared objects (``messages`` in the manifest)."""
        entry = self.manifest["messages"][key]
        if not entry["present"]:
            raise AssertionError(f"torch_npu {self.version} has no {key} text")
        return entry["string"]

    # -- behaviours copied from the wheel ----------------------------------------------------------
    def oom_error(self, size_bytes: int) -> BaseException:
        """The error NPUCachingAllocator.cpp raises (libtorch_npu.so texts): class by the
        manifest."""
        gib = size_bytes / 2**30  # the figures between the two texts are this fake card's
        text = (f"{self.messages('oom_tried_to_allocate')}{gib:.2f} GiB (NPU 0; 60.96 GiB total "
                "capacity; "
                f"58.10 GiB already allocated; 58.10 GiB current active; 1.20 GiB free; 58.50 GiB"
                f"{self.messages('oom_reserved_suffix')} If reserved memory is >> allocated memory "
                "try setting "
                "max_split_size_mb to avoid fragmentation.")
        typed = self.manifest["messages"]["c10_OutOfMemoryError"]["present"]
        return torch.OutOfMemoryError(text) if typed else RuntimeError(text)

    def cpu_fallback(self, op: str) -> None:
        """What an operator without an NPU kernel does: the CAUTION line on fd 2, once per op per
        process, where ``OptionsManager::ShouldPrintWarning`` allows it (its Python twin
        ``_should_print_warning``: utils/utils.py:33-40 of 2.1.0.post17, 2.5.1 and 2.9.0;
        _init/common/warning_utils.py:7-18 of 2.14.0, which reads TORCH_NPU_WARNING_DISABLE
        first)."""
        disabled = os.environ.get("TORCH_NPU_DISABLED_WARNING")
        if self.version == "2.14.0":
            disabled = os.environ.get("TORCH_NPU_WARNING_DISABLE", disabled)
        if op in _WARNED_OPS or disabled == "1" or os.environ.get("RANK", "0") != "0":
            return
        _WARNED_OPS.add(op)
        prefix = self.messages("fallback_prefix")
        unsupported = self.messages("fallback_unsupported")
        self.messages("fallback_will_fall_back")  # the wheel's third piece of the sentence
        line = (f"{prefix}{op}{unsupported.rstrip('.')} and will fall back to run on the CPU. This "
                "may have "
                "performance implications.\n")  # the c10 log prefix of the line is not reproduced
        os.write(2, line.encode())

    def check_path(self, path: str) -> str:
        """``PathManager.check_input_directory_path`` (torch_npu/utils/_path_manager.py,
        ``_input_path_common_check``): the character set of every version; an odd one raises
        ``Invalid input path`` up to 2.9.0 (2.1.0.post17 and 2.5.1 :166-169, 2.9.0 :165-168) and
        only warns in 2.14.0 (:152-155)."""
        if not re.fullmatch(r"(\.|/|_|-|\s|[~0-9a-zA-Z]|[\u4e00-\u9fa5])+", path):
            if self.version == "2.14.0":
                warnings.warn(f"Invalid input path: {path}", stacklevel=2)
            else:
                raise RuntimeError(f"Invalid input path: {path}")
        return path

    def analyse(self, prof: Any, root: Path, worker_name: str | None) -> None:
        """``NpuProfiler.analyse`` (profiler/analysis/_npu_profiler.py; 2.5.1 and 2.9.0 :22-31,
        2.1.0.post17 and 2.14.0 :23-32): none in a daemon process (an error printed), else the
        process-wide start method set to ``fork``, then the CSV files."""
        if multiprocessing.current_process().daemon:
            _print_error_msg("The profiling data cannot be parsed during the daemon process")
            return
        multiprocessing.set_start_method("fork", force=True)
        _write_ascend_pt(self, prof, root, worker_name)

    # -- torch.npu ---------------------------------------------------------------------------------
    def _synchronize(self, device: Any = None) -> None:
        self.calls.append(("synchronize", device))
        if self.oom_on_synchronize is not None:
            raise self.oom_error(self.oom_on_synchronize)

    def _reset_peak(self, device: Any = None) -> None:
        self.peak_bytes = self.allocated_bytes

    def _mem_get_info(self, device: Any = None) -> tuple[int, int]:
        return TOTAL_MEMORY - self.allocated_bytes, TOTAL_MEMORY

    def _event(self, enable_timing: bool = False, blocking: bool = False,
               interprocess: bool = False) -> Any:
        fake = self

        class Event:  # torch_npu/npu/streams.py Event: record / elapsed_time / synchronize
            def __init__(self) -> None:
                self.at = None

            def record(self, stream: Any = None) -> None:
                fake.calls.append(("event.record", None))
                self.at = time.perf_counter()

            def elapsed_time(self, end: Any) -> float:
                return (end.at - self.at) * 1000.0

            def synchronize(self) -> None:
                pass
        return Event()

    def _properties(self, device_name: Any = None) -> Any:
        fields = {"total_memory": TOTAL_MEMORY, "cube_core_num": 24, "vector_core_num": 48,
                  "L2_cache_size": 192 * 2**20}
        known = set(self.manifest["device_property_fields"])
        return types.SimpleNamespace(name=self.device_name,
                                     **{k: v for k, v in fields.items() if k in known})

    def _compile_mode(self, jit_compile: bool = False) -> None:
        self.jit_compile = bool(jit_compile)

    def _npu_module(self) -> ManifestModule:
        entry = self.manifest["modules"]["torch_npu.npu"]
        npu = ManifestModule("torch_npu.npu", entry, self.version)
        def counter(value: Callable[[], Any]) -> Callable[..., Any]:
            return lambda device=None: value()  # (device=None) as in memory.py
        options = {k: _Options(entry["names"][k].get("instance", {}).get("attributes", []),
                               UNSET.get(entry["names"][k].get("call", "")))
                   for k in ("matmul", "conv") if k in entry["names"]}
        npu.provide(is_available=lambda: True, device_count=lambda: self.devices,
                    synchronize=self._synchronize,
                    Event=self._event, get_device_name=lambda device_name=None: self.device_name,
                    get_device_properties=self._properties, set_compile_mode=self._compile_mode,
                    is_jit_compile_false=lambda: not self.jit_compile, is_initialized=lambda: True,
                    empty_cache=lambda: None,
                    set_device=lambda device: self.calls.append(("set_device", device)),
                    current_device=lambda: 0,
                    reset_peak_memory_stats=self._reset_peak,
                    max_memory_allocated=counter(lambda: self.peak_bytes),
                    max_memory_reserved=counter(lambda: self.peak_bytes),
                    memory_allocated=counter(lambda: self.allocated_bytes),
                    memory_reserved=counter(lambda: self.allocated_bytes),
                    mem_get_info=self._mem_get_info, **options)
        return npu

    def _modules(self) -> dict[str, ManifestModule]:
        mods = self.manifest["modules"]
        top = ManifestModule("torch_npu", mods["torch_npu"], self.version, self.manifest["ops"])
        npu = self._npu_module()
        utils = ManifestModule("torch_npu.npu.utils", mods["torch_npu.npu.utils"], self.version)
        if "get_cann_version" in mods["torch_npu.npu.utils"]["names"]:
            utils.provide(get_cann_version=lambda module="CANN": "8.1.RC1")
        profiler = ManifestModule("torch_npu.profiler", mods["torch_npu.profiler"], self.version)
        profiler.provide(**_profiler_behaviours(self))
        top.__version__ = self.version
        top.provide(npu=npu, profiler=profiler)
        npu.__dict__["utils"] = utils  # a submodule: an attribute of its package once imported
        return {"torch_npu": top, "torch_npu.npu": npu, "torch_npu.npu.utils": utils,
                "torch_npu.profiler": profiler}


def _profiler_behaviours(fake: FakeNpu) -> dict[str, Any]:
    """``profile``, ``ProfilerActivity`` and ``tensorboard_trace_handler`` of
    torch_npu/profiler/profiler.py."""
    names = fake.manifest["modules"]["torch_npu.profiler.profiler"]["names"]
    listed = set(names["profile"]["methods"]) | set(names["profile"]["attributes"])
    # _KinetoProfile: export_chrome_trace, ...
    for inherited in names["profile"]["inherited"].values():
        listed |= set(inherited)
    extensions = fake.manifest["extension_attributes"]
    activity_names = extensions["torch_npu._C._profiler.ProfilerActivity"]
    activity = types.SimpleNamespace(**{n: n for n in activity_names})

    def tensorboard_trace_handler(dir_name: str | None = None, worker_name: str | None = None,
                                  analyse_flag: bool = True,
                                  async_mode: bool = False) -> Callable[[Any], None] | None:
        try:  # @no_exception_func(): the error is printed, the handler is None (no analysis)
            root = Path(fake.check_path(os.path.realpath(dir_name or os.getcwd())))
        except RuntimeError as exc:
            _print_error_msg(f"Call tensorboard_trace_handler failed. Exception: {exc}")
            return None

        def handler_fn(prof: Any) -> None:
            if analyse_flag:
                fake.analyse(prof, root, worker_name)
        return handler_fn

    class profile:  # noqa: N801 - torch_npu's name
        def __init__(self, *, activities: Any = None, schedule: Any = None,
                     on_trace_ready: Any = None,
                     record_shapes: bool = False, **kwargs: Any) -> None:
            self.on_trace_ready = on_trace_ready
            self._host = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                                record_shapes=record_shapes)

        def __getattribute__(self, attr: str) -> Any:
            if not attr.startswith("_") and attr not in listed:
                raise AttributeError(f"'profile' object has no attribute {attr!r} (torch_npu "
                                     f"{fake.version})")
            return object.__getattribute__(self, attr)

        def __enter__(self) -> Any:
            self.start()
            return self

        def __exit__(self, *exc: Any) -> None:
            self.stop()

        def start(self) -> None:
            self._host.__enter__()

        def stop(self) -> None:
            self._host.__exit__(None, None, None)
            if self.on_trace_ready:
                self.on_trace_ready(self)

        def step(self) -> None:
            self._host.step()

        def export_chrome_trace(self, output_path: str) -> None:
            self._host.export_chrome_trace(output_path)

    return {"profile": profile, "ProfilerActivity": activity,
            "tensorboard_trace_handler": tensorboard_trace_handler}


def _print_error_msg(message: str) -> None:
    """profiler/analysis/prof_common_func/_constant.py ``print_error_msg``: to stdout."""
    print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] [ERROR] [{os.getpid()}] profiler.py: "
          f"{message}", flush=True)


def _write_ascend_pt(fake: FakeNpu, prof: Any, root: Path, worker_name: str | None) -> Path:
    """``<root>/<worker>_<pid>_<time>_ascend_pt/ASCEND_PROFILER_OUTPUT/*.csv`` with the wheel's
    column names."""
    layout = fake.manifest["profiler"]
    stamp = datetime.now(tz=timezone.utc).astimezone().strftime("%Y%m%d%H%M%S%f")[:-3]
    worker = f"{worker_name or socket.gethostname()}_{os.getpid()}"
    run_dir = Path(fake.check_path(str(root / layout["run_dir_format"]["value"].format(worker,
                                                                                    stamp))))
    out = run_dir / layout["output_dir"]["value"]
    out.mkdir(parents=True)
    events = [e for e in prof._host.events() if e.self_cpu_time_total > 0]
    # inputs joined with ";\r\n" as prof_bean/_torch_op_bean.py does (the element format "[1, 16]"
    # is assumed)
    operator_rows = [[e.name, ";\r\n".join(str(list(shape)) for shape in e.input_shapes or []), "",
                      e.self_cpu_time_total, e.cpu_time_total, e.self_cpu_time_total,
                      e.cpu_time_total,
                      e.self_cpu_time_total, e.cpu_time_total] for e in events]
    _csv(out / "operator_details.csv", layout["operator_details.csv"]["value"], operator_rows)
    kernels = [[0, e.name, e.name.split("::")[-1], "AI_CORE", e.time_range.start,
                e.self_cpu_time_total, 0, 24]
               for e in events]
    _csv(out / "kernel_details.csv", layout["kernel_details.csv"]["value"], kernels)
    by_type: dict[str, list[float]] = defaultdict(list)
    for kernel in kernels:
        by_type[kernel[2]].append(kernel[5])
    total = sum(sum(v) for v in by_type.values()) or 1.0
    stats = [[t, "AI_CORE", len(v), sum(v), min(v), sum(v) / len(v), max(v), 100.0 * sum(v) / total]
             for t, v in by_type.items()]
    _csv(out / "op_statistic.csv", layout["op_statistic.csv"]["value"], stats)
    prof._host.export_chrome_trace(str(out / "trace_view.json"))
    return run_dir


def _csv(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def install(monkeypatch: Any, version: str = DEFAULT_VERSION, **options: Any) -> FakeNpu:
    """Make ``import torch_npu`` (and ``torch.npu``) the fake of ``version`` for one test."""
    fake = FakeNpu(version, **options)
    for name, module in fake.modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(torch, "npu", fake.modules["torch_npu.npu"], raising=False)
    return fake


class HostTensorNpuAdapter(DeviceAdapter):
    """The NPU adapter with the fake runtime, whose tensors stay on the host (no NPU memory exists
    here): everything else (runtime calls, settings, timing, memory figures) goes through the fake
    ``torch.npu``."""

    @property
    def torch_device(self) -> torch.device:
        """The host: the stand-in device's memory."""
        return torch.device("cpu")
