"""Live-tensor accounting on meta tensors and the CPU reference refusal (the job's resources)."""

from __future__ import annotations

import pytest
import torch

from ascendbench.baseline.bounded import Bounds
from ascendbench.baseline.memory import (
    CHILD_PROCESS_BYTES,
    HostBudget,
    check_baseline_memory,
    choose_auto_reference,
    estimate_reference,
    guard_reference_memory,
    reference_memory,
)
from ascendbench.baseline.service import ReferenceQuery
from ascendbench.errors import InsufficientMemoryError
from ascendbench.models.memory import LiveTensorBytes, activation_bytes, run_memory
from ascendbench.tasks.vae_decode import VaeDecodeTask

from helpers import build_tiny_flux2


def test_live_bytes_counts_outputs_frees_dead_tensors_and_shares_views():
    with torch.inference_mode(), LiveTensorBytes() as tracker:
        x = torch.ones(256, device="meta")  # 1 KiB
        y = x * 2  # 2 KiB live
        view = y.view(16, 16)  # a view: no new storage
        del x  # 1 KiB live
        z = y + 1  # 2 KiB live
        del y, view, z
    assert tracker.peak == 2048 and tracker.current == 0


def test_float64_convolution_counts_its_unfolded_input():
    conv = torch.nn.Conv2d(8, 4, 3, padding=1).to("meta", torch.float64)
    x = torch.empty(2, 8, 16, 16, device="meta", dtype=torch.float64)
    with torch.inference_mode(), LiveTensorBytes() as tracker:
        conv(x)
    unfolded = 2 * 8 * 9 * 16 * 16 * 8  # batch x C_in x kernel x output positions x 8 bytes
    output = 2 * 4 * 16 * 16 * 8
    assert tracker.peak == unfolded + output


@pytest.fixture
def decode():
    task = VaeDecodeTask(latent_channels=4, spatial_compression=2)
    return task, task.make_inputs({"height": 64, "width": 64, "batch_size": 1}, 0)


def test_activation_estimate_leaves_the_real_module_untouched(decode):
    task, inputs = decode
    model = build_tiny_flux2()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    estimate = activation_bytes(model, task, inputs, torch.float64)
    output_bytes = 1 * 3 * 64 * 64 * 8
    assert estimate > output_bytes
    after = model.state_dict()
    assert all(after[k].device.type == "cpu" and after[k].dtype == before[k].dtype
               and torch.equal(after[k], before[k])
               for k in before)


def test_meta_and_real_modules_give_the_same_estimate(decode):
    task, inputs = decode
    with torch.device("meta"):
        meta = build_tiny_flux2()
    assert activation_bytes(meta, task, inputs,
                            torch.float32) == activation_bytes(build_tiny_flux2(), task, inputs,
                                                                                   torch.float32)


def test_refusal_names_the_numbers_and_the_ways_out(decode):
    task, inputs = decode
    model = build_tiny_flux2()
    fits = check_baseline_memory(model, task, inputs, torch.float64, HostBudget(available=8 << 30))
    assert fits["fits"] and fits["activations_mb"] > 0 and fits["num_params"] == sum(
        t.numel() for t in [*model.parameters(), *model.buffers()])
    with pytest.raises(InsufficientMemoryError) as err:
        check_baseline_memory(model, task, inputs, torch.float64,
                              HostBudget(available=1 << 20, what="tiny at 64 px"))
    message = str(err.value)
    assert "refusing the CPU reference of tiny at 64 px in float64" in message
    assert "0.0 GB is available" in message and "baseline.reference=float32" in message
    assert "baseline.enabled=false" in message and "Nothing was allocated" in message


def test_unestimable_activations_fall_back_to_parameters(decode):
    class Peeking(VaeDecodeTask):
        def run(self, model, inputs):
            float(inputs["latent"].sum())  # data-dependent: impossible on meta tensors
            return super().run(model, inputs)

    task, inputs = decode
    memory = run_memory(build_tiny_flux2(), Peeking(4, 2), inputs, torch.float32)
    assert memory.activations is None and "not estimated" in memory.activation_note
    assert memory.total == memory.parameter_bytes > 0


def test_guard_skips_cached_references_and_can_be_switched_off(compose_cfg, decode, tmp_path):
    from ascendbench.baseline.key import cache_key, key_material
    from ascendbench.baseline.store import BaselineStore
    from ascendbench.tasks.inputs import describe

    task, inputs = decode
    model = build_tiny_flux2()
    cfg = compose_cfg(["model=tiny_flux2_decoder", f"baseline.cache_dir={tmp_path}",
                       "+baseline.memory_check=true"])
    weights = {"kind": "random-init", "init_seed": 42}
    info = describe(inputs)
    query = ReferenceQuery(cfg, task, inputs, torch.float64, weights, info, module=model)
    guarded = guard_reference_memory(query)
    assert guarded["fits"]
    # the job's model is loaded when the guard runs: it is already out of the available memory, not
    # counted again;
    # the child process's own imports are
    assert guarded["host_need_mb"] == pytest.approx(guarded["total_mb"] + CHILD_PROCESS_BYTES / 1e6)
    assert guarded["reference_process_mb"] == guarded["host_need_mb"]
    key = cache_key(key_material(cfg, weights, info, torch.float64))
    assert key == query.key
    BaselineStore(tmp_path).write_outputs(key, {"image": torch.zeros(1)}, {"precision": "float64"})
    assert "cached" in guard_reference_memory(query)["skipped"]
    cfg.baseline.memory_check = False
    assert "memory_check=false" in guard_reference_memory(query)["skipped"]


def _need(info):
    return int(info["host_need_mb"] * 1e6)


def test_float64_reference_estimate_is_bounded_and_float32_is_unchanged(decode):
    task, inputs = decode
    model = build_tiny_flux2()
    small = Bounds(conv_bytes=64 << 10)
    bounded = reference_memory(model, task, inputs, torch.float64, small)
    unbounded = run_memory(model, task, inputs, torch.float64)
    assert bounded.activations < unbounded.activations / 2 and "bounded" in bounded.activation_note
    assert reference_memory(model, task, inputs, torch.float32) == run_memory(model, task, inputs,
                                                                              torch.float32)


def test_auto_reference_is_float64_when_it_fits_else_float32_with_both_estimates(decode):
    task, inputs = decode
    model = build_tiny_flux2()
    f64 = estimate_reference(model, task, inputs, torch.float64, HostBudget(available=1 << 40))
    f32 = estimate_reference(model, task, inputs, torch.float32, HostBudget(available=1 << 40))
    assert _need(f32) < _need(f64)
    roomy = HostBudget(available=1 << 40)
    assert choose_auto_reference(model, task, inputs, roomy)[0] == torch.float64
    between = HostBudget(headroom=1.0, available=(_need(f32) + _need(f64)) // 2)
    precision, info = choose_auto_reference(model, task, inputs, between)
    assert precision == torch.float32
    assert info["dtype"] == "float32"
    assert info["float64"]["dtype"] == "float64"
    assert "float64 reference needs about" in info["choice"] and not info["float64"]["fits"]
    with pytest.raises(InsufficientMemoryError) as err:
        choose_auto_reference(model, task, inputs,
                              HostBudget(headroom=1.0, available=_need(f32) - 1, what="tiny"))
    message = str(err.value)
    assert "in float64 or float32" in message
    assert "float64: about" in message
    assert "float32: about" in message
    assert "\n" not in message


def test_pipeline_activations_are_estimated(compose_cfg):
    """A pipeline (not an nn.Module) with a seed input: estimated on meta, no "'dict' object is not
    callable"."""
    from hydra.utils import instantiate

    cfg = compose_cfg(["model=tiny_ltx2_t2v", "model.weights=random", "preset.height=64",
                       "preset.width=64",
                       "preset.num_frames=9", "preset.steps=2"])
    loader, task = instantiate(cfg.model.loader), instantiate(cfg.model.task)
    pipe = loader.load(None, "random", 0, None).module
    inputs = task.make_inputs(cfg.preset, 0)
    before = {k: v.clone() for k, v in pipe.transformer.state_dict().items()}
    memory = run_memory(pipe, task, inputs, torch.float32)
    assert memory.activations is not None and memory.activations > 0, memory.activation_note
    assert all(torch.equal(v, before[k])
               and not v.is_meta for k, v in pipe.transformer.state_dict().items())
