"""The ``diffusers_attention_backend`` patch: set through diffusers' dispatcher, restored."""

from __future__ import annotations

import pytest
import torch

from ascendbench.errors import PatchError
from ascendbench.patches.registry import patches_applied


@pytest.fixture(scope="module")
def transformer():
    from diffusers import FluxTransformer2DModel

    torch.manual_seed(0)
    return FluxTransformer2DModel(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1,
                                  attention_head_dim=8, num_attention_heads=2,
                                  joint_attention_dim=8, pooled_projection_dim=8,
                                  axes_dims_rope=(2, 2, 4)).eval()


def _backends(model):
    return [m.processor._attention_backend for m in model.modules()
            if hasattr(getattr(m, "processor", None), "_attention_backend")]


def _active():
    from diffusers.models.attention_dispatch import _AttentionBackendRegistry

    return _AttentionBackendRegistry._active_backend


def test_backend_is_set_and_everything_restored(transformer):
    from diffusers.models.attention_dispatch import AttentionBackendName

    before = _active()
    spec = [{"name": "diffusers_attention_backend", "backend": "_native_math", "devices": ["cpu"]}]
    with patches_applied(spec, transformer, "cpu") as infos:
        assert _backends(transformer) == [AttentionBackendName._NATIVE_MATH] * 2
        assert _active() == AttentionBackendName._NATIVE_MATH
    assert infos[0]["backend"] == "_native_math"
    assert infos[0]["models"] == ["FluxTransformer2DModel"]
    assert _backends(transformer) == [None, None] and _active() == before


def test_a_backend_set_before_is_put_back(transformer):
    from diffusers.models.attention_dispatch import AttentionBackendName

    processor = next(m.processor for m in transformer.modules()
                     if hasattr(getattr(m, "processor", None), "_attention_backend"))
    processor._attention_backend = AttentionBackendName.NATIVE
    try:
        spec = [{"name": "diffusers_attention_backend", "backend": "_native_math",
                 "devices": ["cpu"]}]
        with patches_applied(spec, transformer, "cpu"):
            assert processor._attention_backend == AttentionBackendName._NATIVE_MATH
        assert processor._attention_backend == AttentionBackendName.NATIVE
    finally:
        processor._attention_backend = None


def test_pipeline_components_are_found_by_name(transformer):
    class Pipeline:  # the part of a DiffusionPipeline the patch uses
        components = {"transformer": transformer, "vae": torch.nn.Linear(2, 2),
                      "scheduler": object()}

    spec = [{"name": "diffusers_attention_backend", "backend": "_native_math", "devices": ["cpu"],
             "components": ["transformer"]}]
    with patches_applied(spec, Pipeline(), "cpu") as infos:
        assert infos[0]["models"] == ["transformer"]


def test_default_is_native_npu_on_npu_only(transformer):
    with patches_applied(["diffusers_attention_backend"], transformer, "cpu") as infos:
        assert "not applied on cpu" in infos[0]["skipped"]
        assert _backends(transformer) == [None, None]


@pytest.mark.skipif(__import__("importlib.util").util.find_spec("torch_npu") is not None,
                    reason="torch_npu present")
def test_native_npu_without_torch_npu_says_what_to_install(transformer):
    with pytest.raises(PatchError, match="backend_requirements.*torch_npu") as info:
        with patches_applied(["diffusers_attention_backend"], transformer, "npu"):
            pass
    assert "native" in str(info.value) and _backends(transformer) == [None, None]


def test_unknown_backend_lists_the_known_ones(transformer):
    spec = [{"name": "diffusers_attention_backend", "backend": "warp_drive", "devices": ["cpu"]}]
    with pytest.raises(PatchError, match="diffusers_dispatcher.*warp_drive.*_native_npu"):
        with patches_applied(spec, transformer, "cpu"):
            pass
