"""Registered, checked, reversible patches of third-party code (``model.patches``).

* ``flex_attention_dense`` -- flex_attention + create_block_mask as dense-mask SDPA (no inductor/Triton);
* ``diffusers_attention_backend`` -- a diffusers attention backend (default ``_native_npu``) on NPU runs.
"""

from ascendbench.patches import attention_backend, flex_attention_dense  # noqa: F401  (registers the patches)
from ascendbench.patches.flex_dense import (
    DenseBlockMask,
    MaskGrid,
    block_mask_to_dense,
    dense_create_block_mask,
    dense_flex_attention,
    evaluate_mask_mod,
)
from ascendbench.patches.registry import (
    Check,
    Patch,
    PatchSpec,
    available_patches,
    get_patch,
    parse_specs,
    patches_applied,
    register_patch,
)

__all__ = [
    "Check", "Patch", "PatchSpec", "available_patches", "get_patch", "parse_specs", "patches_applied",
    "register_patch", "DenseBlockMask", "MaskGrid", "block_mask_to_dense", "dense_create_block_mask",
    "dense_flex_attention", "evaluate_mask_mod",
]
