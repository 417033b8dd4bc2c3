"""Memory a run will need, and the refusal of a CPU reference that would not fit: the names the job's stages
use, from where they live (the estimator in :mod:`ascendbench.models.activations`, the reference's guard in
:mod:`ascendbench.baseline.memory`)."""

from ascendbench.baseline.memory import (  # noqa: F401
    CHILD_PROCESS_BYTES,
    HostBudget,
    check_baseline_memory,
    choose_auto_reference,
    estimate_reference,
    guard_reference_memory,
    job_budget,
    memory_check_skipped,
    reference_memory,
)
from ascendbench.models.activations import (  # noqa: F401
    LiveTensorBytes,
    RunMemory,
    activation_bytes,
    meta_like,
    module_components,
    run_memory,
)
