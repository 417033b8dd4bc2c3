"""Typed schemas in Hydra's ConfigStore: a wrong type or enum fails at compose time. Values live in
the YAML (``MISSING``: each option sets it); ``metric``, model keys stay open (rules check them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional, Sequence

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


class Choice(str, Enum):
    """A member of a closed set is its value, as ``str``, f-strings, ``repr`` and JSON show it."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(str.__str__(self), spec)

    def __repr__(self) -> str:
        return repr(str.__str__(self))


def choices(name: str, values: Sequence[str]) -> type[Choice]:
    """A :class:`Choice` enum whose members are named by their values (``in-process`` too)."""
    return Choice(name, [(value, value) for value in values], module=__name__, qualname=name)


# model.weights: load if found, else seeded random init | fail when not found | never look
Weights = choices("Weights", ("auto", "required", "random"))
DtypeName = choices("DtypeName", ("auto", "float32", "float16", "bfloat16"))
ReferenceDtype = choices("ReferenceDtype", ("auto", "same", "float32", "float64"))
BenchProtocol = choices("BenchProtocol", ("adaptive", "fixed"))
BaselineProcess = choices("BaselineProcess", ("child", "in-process"))  # where the reference runs
ReferenceMode = choices("ReferenceMode", ("auto", "whole", "replay"))
# baseline.source_allow: the fields in which a saved reference may differ
SourceField = choices("SourceField", ("model", "task", "sizes", "seed", "inputs_sha256",
                                      "weights_digest"))
FailOn = choices("FailOn", ("WARN", "FAIL"))  # the verdict from which a job exits 1
Objective = choices("Objective", ("latency", "latency_per_sample"))  # for optimisation sweeps
DeviceName = choices("DeviceName", ("auto", "cpu", "cuda", "npu"))
DeviceType = choices("DeviceType", ("cpu", "cuda", "npu"))
FrameLayout = choices("FrameLayout", ("auto", "BCTHW", "BTCHW"))
MsprobeLevel = choices("MsprobeLevel", ("L0", "L1", "mix"))
FRAME_WORDS = ("first", "middle", "last", "worst")  # compare.visual.frames: by position or error


@dataclass
class BudgetConfig:
    """The timing-budget keys that ``preset`` carries and ``bench`` interpolates."""

    warmup: int = MISSING
    iters: Optional[int] = None
    min_iters: int = MISSING
    max_iters: int = MISSING
    min_time_s: float = MISSING
    max_time_s: float = MISSING
    stability: Optional[float] = None  # deprecated and ignored (the stop rule is bench.precision)


@dataclass
class SizesConfig:
    """The sizes of a preset (a task ignores what it does not use)."""

    name: str = MISSING
    height: int = MISSING
    width: int = MISSING
    num_frames: int = MISSING
    batch_size: int = MISSING
    steps: int = MISSING


@dataclass
class PresetConfig(BudgetConfig, SizesConfig):
    """``preset``: sizes, then the timing budget."""


@dataclass
class Switch:
    """An ``enabled`` key, first (``bench``, ``bench.flops``, ``baseline``, ``resume``...)."""

    enabled: bool = MISSING


@dataclass
class FlopsConfig(Switch):
    """``bench.flops``: FLOP counting for TFLOP/s and MFU."""

    heavy_ops: List[str] = MISSING


@dataclass
class HistoryConfig(Switch):
    """``bench.history``: each workload's earlier medians on this host."""

    dir: str = MISSING
    keep: int = MISSING
    max_age_h: float = MISSING


@dataclass
class BenchConfig(BudgetConfig, Switch):
    """``bench``: the timing loop (its budget interpolates the preset's; enabled=false times one
    call and counts nothing)."""

    protocol: BenchProtocol = MISSING
    precision: Optional[float] = None
    warmup_max: Optional[int] = None
    warmup_tolerance: float = 0.05
    warmup_patience: int = 2
    noise_threshold: float = MISSING
    events: bool = MISSING
    phases: bool = MISSING
    flops: FlopsConfig = field(default_factory=FlopsConfig)
    history: HistoryConfig = field(default_factory=HistoryConfig)
    ab: Optional[str] = None  # null | unpatched (checked by config.rules)


@dataclass
class ReplayConfig:
    """``baseline.replay``: the per-module replay reference."""

    layers: Any = None
    calls: List[Any] = field(default_factory=lambda: ["first", "last"])
    max_capture_mb: float = 8192.0
    margin: float = 32.0
    precision: str = "auto"


@dataclass
class BaselineConfig(Switch):
    """``baseline``: the CPU reference run and its cache."""

    reference: ReferenceDtype = MISSING
    process: BaselineProcess = MISSING
    reference_mode: ReferenceMode = ReferenceMode("auto")
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    cache: bool = MISSING
    cache_dir: str = MISSING
    lock_timeout_s: float = MISSING
    key_ignore_preset: List[str] = MISSING
    source: Optional[str] = None
    source_allow: List[SourceField] = field(default_factory=list)


@dataclass
class DivergenceConfig:
    """``compare.divergence``: the first-divergent-module rule of ``compare.layers=all``."""

    input_max_rel_err: float = MISSING
    output_min_rel_err: float = MISSING
    statistics: List[str] = MISSING


@dataclass
class VisualConfig(Switch):
    """``compare.visual``: side-by-side pictures of the outputs."""

    max_images: int = MISSING
    frames: List[Any] = MISSING
    layout: FrameLayout = MISSING
    value_range: List[float] = MISSING
    colormap: str = MISSING


@dataclass
class CompareConfig:
    """``compare``: layer comparison, compare.csv and pictures."""

    layers: Any = None
    thresholds: Dict[str, Any] = field(default_factory=dict)
    thresholds_by_dtype: Dict[str, Any] = field(default_factory=dict)  # merged over thresholds
    verdict: bool = MISSING
    max_capture_mb: float = MISSING
    divergence: DivergenceConfig = field(default_factory=DivergenceConfig)
    csv: bool = MISSING
    visual: VisualConfig = field(default_factory=VisualConfig)
    msprobe: bool = MISSING
    msprobe_level: MsprobeLevel = MISSING


@dataclass
class DtypeConfig:
    """``dtype``: what every option has; an option names its own schema for the rest."""

    name: DtypeName = MISSING


@dataclass
class DtypeRulesConfig(DtypeConfig):
    """``dtype=float32|float16|bfloat16``: tolerances and verdict rules (``dtype_schema``)."""

    atol: float = MISSING
    rtol: float = MISSING
    small_value: float = MISSING
    small_value_atol: float = MISSING
    small_value_bound: float = MISSING
    thresholds: Dict[str, Any] = field(default_factory=dict)


@dataclass
class AutoDtypeConfig(DtypeConfig):
    """``dtype=auto``: the dtype chosen per device type (``dtype_auto_schema``)."""

    by_device: Dict[str, DtypeName] = MISSING


@dataclass
class DeviceConfig:
    """``device``: the device adapter (cpu and cuda; npu and auto add keys)."""

    peak: Dict[str, Any] = field(default_factory=dict)
    _target_: str = MISSING
    name: DeviceName = MISSING
    index: int = MISSING
    env: Dict[str, Optional[str]] = field(default_factory=dict)
    allow_hf32: bool = MISSING
    deterministic: bool = MISSING
    threads: Optional[int] = None
    record_env: List[str] = field(default_factory=list)
    world_size: int = 1  # ranks of the job
    parallel: str = "none"  # none | cfg | device_map | context
    dist: Dict[str, Any] = field(default_factory=dict)  # backend, master_addr/port, timeouts
    compile: str = "none"  # graph mode (ascendbench.graph.VARIANTS)
    compile_options: Dict[str, Any] = field(default_factory=dict)  # mode, fullgraph, targets...


@dataclass
class NpuDeviceConfig(DeviceConfig):
    """``device=npu``: operator compile mode and chip options (``device_npu_schema``)."""

    jit_compile: Optional[bool] = None
    precision_mode: Optional[str] = None  # ACL_PRECISION_MODE (devices/npu.py)
    allow_internal_format: Optional[bool] = None  # null: the chip default


@dataclass
class AutoDeviceConfig(NpuDeviceConfig):
    """``device=auto``: the order device types are tried in (``device_auto_schema``)."""

    order: List[DeviceType] = MISSING


@dataclass
class ModelConfig:
    """``model``: the common keys typed; loader, task and the rest are the model's own (open)."""

    name: str = MISSING
    source: Optional[str] = None
    weights: Weights = MISSING
    revision: Optional[str] = None
    init_seed: int = MISSING
    allow_pickle: bool = False
    expect_digest: Optional[str] = None  # refuse weights of another digest (sha256:<hex>)
    codebook_size: Optional[int] = None
    vae: Optional[str] = None  # a pipeline's decoder, one of the keys of `decoders`
    decoders: Any = None
    loader: Any = MISSING
    patches: Optional[List[Any]] = None
    task: Any = MISSING
    compare_layers: Any = None
    replay_layers: Any = None
    thresholds: Dict[str, Any] = field(default_factory=dict)


@dataclass
class ArtifactsConfig:
    """``artifacts``: files written beside the record."""

    tensors: bool = MISSING
    max_tensor_mb: float = MISSING
    media: bool = MISSING


@dataclass
class ResumeConfig(Switch):
    """``resume``: skip a job whose directory holds an ok record of the same config."""

    force: bool = MISSING


@dataclass
class ProfileConfig:
    """``profile``: a few extra calls under the profiler after the timed loop."""

    enabled: bool = False
    calls: int = 3
    top: int = 15
    trace: bool = True


@dataclass
class DryRunTargetConfig:
    """``dry_run_target``: the memory of the machine a dry run plans for (null: this one's)."""

    host_memory_gb: Optional[float] = None
    device_memory_gb: Optional[float] = None


@dataclass
class AscendBenchConfig:
    """The whole job config: top-level keys and the groups (``metric`` stays open)."""

    seed: int = MISSING
    dry_run: bool = MISSING
    dry_run_target: DryRunTargetConfig = field(default_factory=DryRunTargetConfig)
    fail_on: Optional[FailOn] = FailOn.FAIL  # null: only failed jobs exit 1
    objective: Optional[Objective] = None  # null: the job returns its status
    artifacts: ArtifactsConfig = field(default_factory=ArtifactsConfig)
    resume: ResumeConfig = field(default_factory=ResumeConfig)
    metric: Any = MISSING
    model: ModelConfig = MISSING
    device: DeviceConfig = MISSING
    dtype: DtypeConfig = MISSING
    preset: PresetConfig = MISSING
    bench: BenchConfig = MISSING
    baseline: BaselineConfig = MISSING
    compare: CompareConfig = MISSING
    profile: ProfileConfig = field(default_factory=ProfileConfig)


# ConfigStore name -> schema, at the root (not a group, so --help lists none of them); an option
# file names one in its defaults list as `- /<name>@_here_`.
SCHEMAS: dict[str, type] = {
    "ascendbench_schema": AscendBenchConfig,
    "dtype_schema": DtypeRulesConfig, "dtype_auto_schema": AutoDtypeConfig,
    "device_npu_schema": NpuDeviceConfig, "device_auto_schema": AutoDeviceConfig,
}


def register() -> None:
    """Store every schema in Hydra's ConfigStore (needed before any composition; idempotent)."""
    store = ConfigStore.instance()
    for name, node in SCHEMAS.items():
        store.store(name=name, node=node)
