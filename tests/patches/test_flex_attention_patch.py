"""``flex_attention_dense`` on a model: targets found, outputs unchanged, originals restored."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from ascendbench.errors import PatchError
from ascendbench.patches.flex_attention_dense import DenseBlockMask, MaskGrid, dense_flex_attention
from ascendbench.patches.registry import patches_applied

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "standins"))
from videoflextok_standin import VideoFlexTokStandIn  # noqa: E402  (stand-in)

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return VideoFlexTokStandIn({}).eval()


@pytest.fixture(scope="module")
def clip():
    return torch.rand(1, 3, 9, 32, 32, generator=torch.Generator().manual_seed(1)) * 2 - 1


def _attention_modules(model):
    return [m for m in model.modules() if "flex_attention" in m.__dict__]


def test_patched_model_matches_eager_flex_and_is_restored(model, clip):
    originals = [(m, m.__dict__["flex_attention"]) for m in _attention_modules(model)]
    packers = [(m, m.__dict__["create_block_mask"]) for m in model.modules()
               if "create_block_mask" in m.__dict__]
    noise = [torch.randn(1, 48, 9, 8, 8, generator=torch.Generator().manual_seed(2))]
    with torch.no_grad():
        tokens = model.tokenize(clip)
        expected = model.detokenize(tokens, timesteps=2, noise_list=noise)[0]
        with patches_applied(["flex_attention_dense"], model, "cpu") as infos:
            assert all(m.flex_attention is dense_flex_attention for m, _ in originals)
            assert torch.equal(model.tokenize(clip)[0], tokens[0])
            patched = model.detokenize(tokens, timesteps=2, noise_list=noise)[0]
    assert infos[0]["targets"] == {"attention": 3, "block_mask": 2}
    assert infos[0]["classes"] == ["FlexAttention", "SequencePacker"]
    assert (patched - expected).abs().max() < 1e-5
    assert all(m.flex_attention is fn for m, fn in originals)
    assert all(m.create_block_mask is fn for m, fn in packers)


def test_block_masks_are_dense_and_reused_inside_the_patch(model):
    packer = next(m for m in model.modules() if "create_block_mask" in m.__dict__)
    with patches_applied(["flex_attention_dense"], model, "cpu"):
        x = torch.zeros(1, 200, 48)
        _, first = packer(x, frame_len=64)
        _, again = packer(x, frame_len=64)
    assert isinstance(first, DenseBlockMask) and first.seq_lengths == (256, 256)
    # padding rows are fully masked
    assert first.masks(MaskGrid(1, 2, 256, 256, "cpu"))[0][0, 0, 255].sum() == 0


def test_module_classes_restrict_the_targets(model):
    spec = [{"name": "flex_attention_dense", "module_classes": ["FlexAttention"]}]
    with patches_applied(spec, model, "cpu") as infos:
        assert infos[0]["targets"] == {"attention": 3, "block_mask": 0}


def test_module_level_functions_are_patched_by_dotted_path(monkeypatch):
    module = types.ModuleType("flex_user")
    module.flex_attention = flex_attention
    module.create_block_mask = create_block_mask
    monkeypatch.setitem(sys.modules, "flex_user", module)
    functions = {"flex_user.flex_attention": "attention",
                 "flex_user.create_block_mask": "block_mask"}
    spec = [{"name": "flex_attention_dense", "functions": functions}]
    with patches_applied(spec, torch.nn.Linear(2, 2), "cpu") as infos:
        assert module.flex_attention is dense_flex_attention
        mask = module.create_block_mask(lambda b, h, q, k: q >= k, None, None, 4, 4)
        assert isinstance(mask, DenseBlockMask)
    assert module.flex_attention is flex_attention and module.create_block_mask is create_block_mask
    assert infos[0]["targets"] == {"attention": 0, "block_mask": 0}


def test_no_target_is_an_error_that_says_where_to_look():
    with pytest.raises(PatchError, match="targets_found.*attention_attrs"):
        with patches_applied(["flex_attention_dense"], torch.nn.Linear(2, 2), "cpu"):
            pass


@pytest.mark.parametrize("functions, match",
                         [({"no_such_pkg.flex": "attention"}, "functions_importable"),
                                              ({"torch.nn.functional.relu": "softmax"},
                                               "attention, block_mask")])
def test_bad_function_options_are_refused(functions, match):
    with pytest.raises(PatchError, match=match):
        with patches_applied([{"name": "flex_attention_dense", "functions": functions}],
                             torch.nn.Linear(2, 2), "cpu"):
            pass
