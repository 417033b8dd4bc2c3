"""The video tokenizer task on the tests' stand-in of videoflextok: inputs, sizes, run, gates."""

from __future__ import annotations

import math
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from skimage.metrics import peak_signal_noise_ratio

from ascendbench.errors import TaskError
from ascendbench.patches.registry import patches_applied
from ascendbench.tasks.checks import CheckContext
from ascendbench.tasks.tokenizer import VideoTokenizerTask
from ascendbench.tasks.tokenizer_gates import (
    fixed_latent_gate,
    reconstruction_mse,
    reconstruction_psnr,
    rerun_psnr_gate,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "standins"))
from videoflextok_standin import VideoFlexTokStandIn, build_pretrained  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")

PRESET = {"batch_size": 1, "num_frames": 9, "height": 32, "width": 32}
RULES = {"load_missing_keys": {"max": 0}, "load_unexpected_keys": {"max": 0},
         "config_mismatches": {"max": 0},
         "token_shape_match": {"min": 1}, "token_ids_out_of_range": {"max": 0},
         "token_unique_ratio": {"min": 0.01},
         "rerun_token_agreement": {"min": 1.0}, "recon_psnr_db": {"min": 15.0},
         "recon_out_of_range": {"max": 0}, "control_psnr_gap_db": {"min": 5.0}}


def standin_task(**overrides) -> VideoTokenizerTask:
    """The task as conf/model/tiny_videoflextok.yaml configures it."""
    options = dict(steps=2, tokens_per_chunk=[9, 64], codebook_size=512, resolution=32,
                   chunk_frames=9, overlap_frames=0, overlap_tokens=0, noise_shape=[48, 9, 8, 8],
                   detokenize={"guidance_scale": 1.0})
    return VideoTokenizerTask(**{**options, **overrides})


def real_task() -> VideoTokenizerTask:
    """The task as conf/model/videoflextok_d18_d28.yaml configures it."""
    return VideoTokenizerTask(steps=20, tokens_per_chunk=[5, 256], codebook_size=64000,
                              resolution=256,
                              chunk_frames=17, overlap_frames=1, overlap_tokens=1,
                              noise_shape=[16, 5, 32, 32])


@contextmanager
def dense(model):
    """The model under its ``model.patches`` (as in a job); eager flex_attention on CPU is slow."""
    with patches_applied(["flex_attention_dense"], model, "cpu"):
        yield model


@pytest.fixture(scope="module")
def pretrained():
    with dense(build_pretrained()) as model:
        yield model


@pytest.fixture(scope="module")
def run(pretrained):
    task = standin_task()
    inputs = task.make_inputs(PRESET, seed=42)
    return task, inputs, task.run(pretrained, inputs)


def test_inputs_are_deterministic_structured_clips_and_noise():
    task = standin_task()
    first, again, other = (task.make_inputs(PRESET, seed) for seed in (42, 42, 43))
    assert first["video"].shape == (1, 3, 9, 32, 32) and first["noise"].shape == (1, 48, 9, 8, 8)
    assert torch.equal(first["video"], again["video"])
    assert torch.equal(first["noise"], again["noise"])
    assert not torch.equal(first["video"], other["video"])
    assert first["video"].min() >= -1 and first["video"].max() <= 1


@pytest.mark.parametrize("frames, shape",
                         [(17, [1, 5, 256]), (33, [1, 9, 256]), (65, [1, 17, 256])])
def test_token_shape_of_the_real_model_follows_its_chunks(frames, shape):
    assert real_task().token_shape(1, frames) == shape


@pytest.mark.parametrize("preset, match", [({"num_frames": 18}, "num_frames=18.*17, 33, 49"),
                                           ({"num_frames": 9}, "num_frames=9"),
                                           ({"height": 128}, "fixed 256x256"),
                                           ({"batch_size": 0}, "batch_size=0")])
def test_sizes_the_model_cannot_take_are_refused(preset, match):
    with pytest.raises(TaskError, match=match):
        real_task().make_inputs({"batch_size": 1, "num_frames": 17, "height": 256, "width": 256,
                                 **preset}, 42)


def test_run_gives_tokens_and_a_reconstruction(run):
    task, inputs, outputs = run
    assert outputs["tokens"].dtype == torch.int64
    assert list(outputs["tokens"].shape) == task.token_shape(1, 9)
    assert outputs["reconstruction"].shape == inputs["video"].shape
    assert reconstruction_psnr(outputs["reconstruction"], inputs["video"]) > 18.0


def test_a_timed_call_tokenizes_once_and_detokenizes_once(monkeypatch):
    # what the timing loop times is one run(): a second tokenize in it would double the latency
    task, calls = standin_task(), []
    inputs = task.make_inputs(PRESET, seed=42)
    with dense(VideoFlexTokStandIn({}).eval()) as model:
        for name in ("tokenize", "detokenize"):
            method = getattr(model, name)
            monkeypatch.setattr(model, name, lambda *a, _m=method, _n=name, **k: (
                calls.append(_n), _m(*a, **k))[1])
        task.run(model, inputs)
    assert calls == ["tokenize", "detokenize"]


def test_steps_and_noise_reach_the_flow_decoder():
    torch.manual_seed(3)
    task = standin_task()
    inputs = task.make_inputs(PRESET, seed=42)
    # random weights: the flow depends on steps and noise
    with dense(VideoFlexTokStandIn({}).eval()) as model:
        base = task.run(model, inputs)["reconstruction"]
        assert torch.equal(task.run(model, inputs)["reconstruction"], base)
        assert not torch.equal(standin_task(steps=3).run(model, inputs)["reconstruction"], base)
        shifted = {**inputs, "noise": inputs["noise"] + 1}
        assert not torch.equal(task.run(model, shifted)["reconstruction"], base)


def test_two_chunks_concatenate(pretrained):
    task = standin_task()
    inputs = task.make_inputs({**PRESET, "num_frames": 18}, seed=42)
    outputs = task.run(pretrained, inputs)
    assert list(outputs["tokens"].shape) == [1, 18, 64] and outputs["reconstruction"].shape[2] == 18


def test_reconstruction_psnr_matches_scikit_image():
    generator = torch.Generator().manual_seed(0)
    video = torch.rand(1, 3, 4, 8, 8, generator=generator) * 2 - 1
    recon = (video + 0.1 * torch.randn(video.shape, generator=generator)).clamp(-1, 1)
    expected = peak_signal_noise_ratio(video.double().numpy(), recon.double().numpy(),
                                       data_range=2.0)
    assert reconstruction_psnr(recon, video) == pytest.approx(expected, rel=1e-9)


def _context(model, inputs, outputs, weights, control=None):
    return CheckContext(model, torch.device("cpu"), torch.float32, inputs, outputs, weights, RULES,
                        control)


def test_gates_of_a_loaded_model_pass_and_beat_the_random_control(run, pretrained):
    task, inputs, outputs = run

    @contextmanager
    def control():
        torch.manual_seed(7)
        with dense(VideoFlexTokStandIn({})) as twin:
            yield twin

    weights = {"kind": "loaded",
               "strict_load": {"missing": [], "unexpected": [], "tensors_in_file": 40},
               "config_checks": {"mismatches": 0, "checks": {
                   "chunk_size": {"expected": 9, "actual": 9, "ok": True}}}}
    gates = task.checks(_context(pretrained, inputs, outputs, weights, control))
    judged = {name: entry["verdict"] for name, entry in gates.items() if entry.get("rule")}
    assert judged == {f"gate/{name}": "PASS" for name in RULES}
    assert gates["gate/control_psnr_db"]["verdict"] is None  # informative: the gap carries the rule
    gap = gates["gate/control_psnr_gap_db"]
    gain = gates["gate/recon_psnr_db"]["value"] - gates["gate/control_psnr_db"]["value"]
    assert gap["value"] == pytest.approx(gain)
    shape = gates["gate/token_shape_match"]["details"]
    assert shape == {"expected": [1, 9, 64], "actual": [1, 9, 64]}
    assert gates["gate/rerun_token_agreement"]["details"]["bit_exact"] is True


def test_gates_fail_on_missing_keys_and_wrong_config(run, pretrained):
    task, inputs, outputs = run
    weights = {"kind": "loaded",
               "strict_load": {"missing": ["a.weight"], "unexpected": [], "tensors_in_file": 3},
               "config_checks": {"mismatches": 1, "checks": {}}}
    gates = task.checks(_context(pretrained, inputs, outputs, weights))
    assert gates["gate/load_missing_keys"]["verdict"] == "FAIL"
    assert gates["gate/load_missing_keys"]["details"]["first"] == ["a.weight"]
    assert gates["gate/config_mismatches"]["verdict"] == "FAIL"
    assert "cannot build" in gates["gate/control_psnr_gap_db"]["skipped"]


def test_random_init_weights_skip_load_and_control_and_do_not_judge_quality(run, pretrained):
    task, inputs, outputs = run
    gates = task.checks(_context(pretrained, inputs, outputs,
                                 {"kind": "random-init", "config_checks": None}))
    assert "random-init" in gates["gate/load_missing_keys"]["skipped"]
    assert "random-init" in gates["gate/control_psnr_gap_db"]["skipped"]
    assert "model.loader.expect" in gates["gate/config_mismatches"]["skipped"]
    psnr = gates["gate/recon_psnr_db"]
    assert psnr["verdict"] is None and psnr["not_judged"] == "random-init weights"
    assert psnr["value"] > 0


def test_noise_that_does_not_fit_the_model_is_refused_with_the_fix(pretrained):
    check = ["video_tokenizer.decoder.out.in_features", "vae_video_sizes"]
    task = standin_task(noise_shape=[16, 9, 8, 8], noise_check=check)
    fix = r"noise_shape=\[16, 9, 8, 8\].*model.task.noise_shape=\[48, 9, 8, 8\]"
    with pytest.raises(TaskError, match=fix):
        task.run(pretrained, task.make_inputs(PRESET, seed=42))
    standin_task(noise_check=check).check_noise(pretrained)  # the tiny twin's own setting fits


STABILITY = {"fixed_latent_token_agreement": {"min": 1.0},
             "recon_psnr_rerun_diff_db": {"max": 0.01}}
LOADED = {"kind": "loaded", "strict_load": None, "config_checks": None}


def _stability(task, model, inputs, outputs):
    context = CheckContext(model, torch.device("cpu"), torch.float32, inputs, outputs, LOADED,
                           STABILITY)
    return fixed_latent_gate(task, context), rerun_psnr_gate(task, context)


def test_stability_gates_pass_on_a_deterministic_model_and_mse_sits_beside_psnr(run, pretrained):
    task, inputs, outputs = run
    fixed, rerun = _stability(standin_task(latent_module="video_tokenizer.vae"), pretrained, inputs,
                              outputs)
    entry = fixed["gate/fixed_latent_token_agreement"]
    assert entry["value"] == 1.0 and entry["verdict"] == "PASS"
    assert entry["details"]["bit_exact"] is True
    assert entry["details"]["latents_from"] == "video_tokenizer.vae.encode"
    assert entry["details"]["latent_calls"] == 1
    psnr = rerun["gate/recon_psnr_rerun_diff_db"]
    assert psnr["value"] == 0.0 and psnr["verdict"] == "PASS"
    assert psnr["details"]["identical"] is True
    assert psnr["details"]["rerun_psnr_db"] == psnr["details"]["psnr_db"] > 18
    gates = task.checks(_context(pretrained, inputs, outputs, LOADED))
    mse = gates["gate/recon_mse"]["value"]
    assert mse == pytest.approx(reconstruction_mse(outputs["reconstruction"], inputs["video"]))
    assert gates["gate/recon_psnr_db"]["value"] == pytest.approx(10 * math.log10(2.0**2 / mse))
    assert "latent_module is not set" in gates["gate/fixed_latent_token_agreement"]["skipped"]


def test_a_noisy_vae_is_held_fixed_but_a_noisy_encoder_fails_the_fixed_latent_gate(run, pretrained,
                                                                                   monkeypatch):
    task, inputs, outputs = run
    tokenizer, generator = pretrained.video_tokenizer, torch.Generator().manual_seed(0)
    encode = tokenizer.vae.encode
    def noisy(video):
        return encode(video) + torch.randn(1, generator=generator)

    monkeypatch.setattr(tokenizer.vae, "encode", noisy)
    fixed, _ = _stability(standin_task(latent_module="video_tokenizer.vae"), pretrained, inputs,
                          outputs)
    assert fixed["gate/fixed_latent_token_agreement"]["value"] == 1.0, "the VAE's noise is replayed"
    codes = tokenizer.encoder.to_codes.forward
    monkeypatch.setattr(tokenizer.encoder.to_codes, "forward",
                        lambda x: codes(x) + 0.5 * torch.randn(x.shape[:-1] + (3,),
                                                               generator=generator))
    fixed, _ = _stability(standin_task(latent_module="video_tokenizer.vae"), pretrained, inputs,
                          outputs)
    entry = fixed["gate/fixed_latent_token_agreement"]
    assert entry["value"] < 1.0 and entry["verdict"] == "FAIL"
    assert entry["details"]["bit_exact"] is False
    assert vars(tokenizer.vae)["encode"] is noisy, "the method the replay found is put back"


def test_a_decode_that_is_not_reproducible_fails_the_psnr_rerun_gate(run, pretrained, monkeypatch):
    task, inputs, outputs = run
    reconstruct, calls = task.reconstruct, []

    def drifting(model, tokens, noise):
        calls.append(1)
        return reconstruct(model, tokens, noise) * (1 - 0.05 * len(calls))

    monkeypatch.setattr(task, "reconstruct", drifting)
    _, rerun = _stability(task, pretrained, inputs, outputs)
    entry = rerun["gate/recon_psnr_rerun_diff_db"]
    assert entry["verdict"] == "FAIL" and entry["value"] > 0.01
    assert entry["details"]["identical"] is False


def test_a_wrong_latent_module_is_refused_with_the_key(run, pretrained):
    task, inputs, outputs = run
    with pytest.raises(TaskError,
                       match=r"model.task.latent_module=video_tokenizer.vea: 'vea' not found"):
        _stability(standin_task(latent_module="video_tokenizer.vea"), pretrained, inputs, outputs)
    with pytest.raises(TaskError, match="no method 'encoder'"):
        _stability(standin_task(latent_module="video_tokenizer.vae", latent_method="encoder"),
                   pretrained, inputs, outputs)
