"""Memory estimates before allocating, and the refusal with the numbers (9B+ on 24 GB)."""

from __future__ import annotations

import pytest
import torch
from hydra.utils import instantiate
from safetensors.torch import save_file

import ascendbench.models.memory as memory
from ascendbench.errors import InsufficientMemoryError
from ascendbench.models.loader import DiffusersLoader
from ascendbench.models.memory import (
    MemoryEstimate,
    check_host_memory,
    count_meta_params,
    safetensors_numel,
    tensor_count,
)

from helpers import TINY_FLUX2_ARCH, build_tiny_flux2, compose_config, run_job

GB = 10**9


def _loader(model: str, *overrides: str):
    return instantiate(compose_config([f"model={model}", *overrides]).model.loader)


def test_meta_count_equals_the_built_model_and_allocates_nothing():
    real = build_tiny_flux2()
    from diffusers import AutoencoderKLFlux2

    counted = count_meta_params(lambda: AutoencoderKLFlux2(**TINY_FLUX2_ARCH))
    assert counted == tensor_count(real) == sum(p.numel() for p in real.parameters()) + sum(
        b.numel() for b in real.buffers())


def test_safetensors_headers_give_the_element_count(tmp_path):
    path = tmp_path / "w.safetensors"
    tensors = {"a.weight": torch.zeros(3, 4), "a.bias": torch.zeros(4),
               "b.weight": torch.zeros(5, dtype=torch.bfloat16)}
    save_file(tensors, str(path))
    assert safetensors_numel([path]) == 21
    assert safetensors_numel([path], prefix="a.") == 16


def test_estimate_arithmetic_and_record_view():
    estimate = MemoryEstimate("demo", {"transformer": 2_000_000_000, "vae": 500_000_000},
                              "bfloat16")
    assert estimate.num_params == 2_500_000_000 and estimate.bytes_needed == 5_000_000_000
    info = check_host_memory(estimate, "hint", available=100 * GB)
    assert info["fits"] and info["gb"] == 5.0 and info["available_gb"] == 100.0
    assert info["parts"]["vae"] == 500_000_000


def test_refusal_names_the_numbers_the_key_and_the_smaller_option():
    estimate = MemoryEstimate("random-init X", {"transformer": 9_000_000_000}, "float32")
    with pytest.raises(InsufficientMemoryError) as err:
        check_host_memory(estimate, "Run `model=tiny_x`.", available=24 * GB)
    message = str(err.value)
    assert "36.0 GB" in message and "9,000,000,000 parameters x 4 bytes" in message
    assert "24.0 GB" in message
    assert "model=tiny_x" in message and "model.loader.memory_check=false" in message
    assert "Nothing was allocated" in message
    assert err.value.reason == "insufficient_memory"


def test_diffusers_loader_refuses_a_huge_architecture_before_building_it(monkeypatch):
    monkeypatch.setattr(memory, "available_host_bytes", lambda: 1 * GB)
    loader = DiffusersLoader("diffusers.AutoencoderKLLTX2Video",
                             {"spatial_compression_ratio": 32, "temporal_compression_ratio": 8})
    with pytest.raises(InsufficientMemoryError, match=r"1,222,479,857 parameters x 4 bytes") as err:
        # 1,222,479,601 parameters + 256 buffer elements (latents mean/std)
        loader.load(None, "random", 42)
    assert "memory_check" not in str(err.value), "DiffusersLoader has no switch to name"


def test_sulphur2_without_weights_is_refused_with_the_numbers(monkeypatch):
    monkeypatch.setattr(memory, "available_host_bytes",
                        lambda: 24 * GB)  # this machine, whatever runs the test
    loader = _loader("sulphur2_base")
    with pytest.raises(InsufficientMemoryError) as err:
        loader.load("SulphurAI/Sulphur-2-base", "random", 42)
    message = str(err.value)
    assert "random-init diffusers.LTX2Pipeline" in message and "model=tiny_ltx2_t2v" in message
    assert "transformer 18.876B" in message and "text_encoder 12.203B" in message
    assert "24.0 GB" in message
    assert "scheduler" not in message, "components without tensors are not listed"


def test_tiny_twin_passes_the_same_check(monkeypatch):
    monkeypatch.setattr(memory, "available_host_bytes", lambda: 24 * GB)
    loaded = _loader("tiny_ltx2_t2v").load(None, "random", 42)
    assert loaded.weights["memory_check"]["fits"]
    assert loaded.weights["memory_check"]["num_params"] < 1_000_000


def test_a_job_without_the_weights_fails_cleanly_with_the_refusal_in_its_record(monkeypatch,
                                                                                tmp_path):
    monkeypatch.setattr(memory, "available_host_bytes", lambda: 24 * GB)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = compose_config(["model=sulphur2_base", "device=cpu",
                          f"model.source={tmp_path / 'no_weights_here'}"])
    record = run_job(cfg, tmp_path / "job")
    assert record["status"] == "failed" and record["error"]["reason"] == "insufficient_memory"
    assert "135.4 GB" in record["error"]["message"]
    assert "model=tiny_ltx2_t2v" in record["error"]["message"]
