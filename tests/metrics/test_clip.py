"""The CLIP score: a tiny random CLIPModel and CLIPProcessor saved in the test (its own BPE
vocabulary), checked against the same embeddings computed by hand; skipped with the reason without
weights or a prompt."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from hydra.utils import instantiate

from ascendbench.errors import ConfigError
from ascendbench.metrics.clip import NO_PATH, clip_entries, frames_of

LETTERS = "abcdefghijklmnopqrstuvwxyz"
PROMPT = "a red fox in snow"
MEAN, STD = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory) -> Path:
    """A tiny CLIPModel + CLIPProcessor written with save_pretrained (safetensors), 16 px images."""
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, CLIPTokenizer

    folder = tmp_path_factory.mktemp("clip")
    tokens = ["<|startoftext|>", "<|endoftext|>", *LETTERS, *(c + "</w>" for c in LETTERS)]
    (folder / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"),
                              pad_token="<|endoftext|>")
    images = CLIPImageProcessor(size={"shortest_edge": 16}, crop_size={"height": 16, "width": 16},
                                image_mean=MEAN, image_std=STD)
    text = {"vocab_size": len(tokens), "hidden_size": 16, "intermediate_size": 32,
            "num_hidden_layers": 1, "num_attention_heads": 2, "max_position_embeddings": 32,
            "eos_token_id": 1, "bos_token_id": 0, "pad_token_id": 1}
    vision = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
              "num_attention_heads": 2, "image_size": 16, "patch_size": 8}
    config = CLIPConfig(text_config=text, vision_config=vision, projection_dim=8)
    torch.manual_seed(0)
    CLIPModel(config).save_pretrained(str(folder), safe_serialization=True)
    CLIPProcessor(image_processor=images, tokenizer=tokenizer).save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def task(compose_cfg_module):
    return instantiate(compose_cfg_module(["model=tiny_ltx_t2v"]).model.task)


@pytest.fixture(scope="module")
def compose_cfg_module():
    from hydra import compose, initialize_config_module

    def make(overrides):
        with initialize_config_module("ascendbench.conf", version_base="1.3"):
            return compose("config", overrides=overrides)
    return make


def _video() -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    return torch.rand(1, 5, 3, 16, 16, generator=generator) * 2 - 1  # BTCHW in the task's [-1, 1]


def _by_hand(folder: Path, frame: torch.Tensor, prompt: str) -> float:
    """100 x max(cos, 0) of the projected pooled embeddings; pixels and ids prepared here."""
    from transformers import CLIPModel

    model = CLIPModel.from_pretrained(str(folder)).eval()
    vocab = json.loads((folder / "vocab.json").read_text())
    ids = [vocab["<|startoftext|>"]]
    for word in prompt.split():
        ids += [vocab[c] for c in word[:-1]] + [vocab[word[-1] + "</w>"]]
    ids = ids[:31] + [vocab["<|endoftext|>"]]  # the tiny encoder's 32 positions, the end token kept
    pixels = (frame - torch.tensor(MEAN)[:, None, None]) / torch.tensor(STD)[:, None, None]
    with torch.no_grad():
        image = model.visual_projection(model.vision_model(pixel_values=pixels[None]).pooler_output)
        text = model.text_projection(model.text_model(input_ids=torch.tensor([ids])).pooler_output)
    cosine = torch.nn.functional.cosine_similarity(image.double(), text.double())
    return float(100 * cosine.clamp(min=0))


def test_the_clip_score_equals_the_embeddings_computed_by_hand(clip_dir, task) -> None:
    video = _video()
    job = SimpleNamespace(task=task, outputs={"frames": video}, weights={"kind": "loaded"},
                          reference=None)
    task.prompt = PROMPT
    entry = clip_entries({"path": str(clip_dir), "frames": 3}, job)["clip_score"]
    frames = frames_of(video, "BTCHW", 3)
    low, high = task.value_range
    by_hand = [_by_hand(clip_dir, (frame - low) / (high - low), PROMPT) for frame in frames]
    assert entry["frames"] == 3 and entry["prompt"] == PROMPT and max(by_hand) > 0
    assert entry["value"] == pytest.approx(sum(by_hand) / 3, rel=1e-5, abs=1e-6)
    assert entry["min"] == pytest.approx(min(by_hand), rel=1e-5, abs=1e-6)
    assert "verdict" not in entry, "not judged without metric.clip.min"
    judged = clip_entries({"path": str(clip_dir), "frames": 3, "min": 101.0}, job)["clip_score"]
    # above any CLIP score: a planted failure
    assert judged["verdict"] == "FAIL" and judged["threshold"] == 101.0
    job.weights = {"kind": "random-init"}
    untrained = clip_entries({"path": str(clip_dir), "frames": 3, "min": 101.0}, job)["clip_score"]
    assert untrained["verdict"] is None and untrained["would_be"] == "FAIL"
    assert "random-init" in untrained["not_judged"]


def test_without_weights_or_a_prompt_the_entry_is_skipped_with_the_reason(clip_dir, task) -> None:
    job = SimpleNamespace(task=task, outputs={"frames": _video()}, weights=None, reference=None)
    assert clip_entries({"path": None}, job) == {"clip_score": {"skipped": NO_PATH}}
    task.prompt = ""
    assert "has no prompt" in clip_entries({"path": str(clip_dir)}, job)["clip_score"]["skipped"]
    skipped = clip_entries({"path": None}, job)["clip_score"]["skipped"]  # a VAE decode's case
    assert "has no prompt" in skipped and "metric.clip.path" not in skipped, "no hint it can't use"


def test_a_path_without_a_model_is_named(tmp_path, task) -> None:
    task.prompt = PROMPT
    job = SimpleNamespace(task=task, outputs={"frames": _video()}, weights=None, reference=None)
    with pytest.raises(ConfigError, match="metric.clip.path=.* is not a directory with a config"):
        clip_entries({"path": str(tmp_path / "absent")}, job)


def test_a_wrong_clip_path_fails_the_job_before_anything_runs(compose_cfg, tmp_path) -> None:
    from helpers import run_job

    cfg = compose_cfg(["model=tiny_flux2_decoder", "device=cpu",
                       f"metric.clip.path={tmp_path / 'no_clip'}",
                       f"baseline.cache_dir={tmp_path / 'cache'}"])
    record = run_job(cfg, tmp_path / "job")
    assert record["status"] == "failed" and record["error"]["type"] == "ConfigError"
    assert "metric.clip.path=" in record["error"]["message"]
    assert record["bench"] is None, "nothing ran"


def test_a_prompt_longer_than_the_text_encoder_is_cut_as_clip_reads_it(clip_dir, task) -> None:
    long_prompt = " ".join(["a red fox in snow"] * 4)  # 4 x 14 letters + specials: past 32
    task.prompt = long_prompt
    video = _video()
    job = SimpleNamespace(task=task, outputs={"frames": video}, weights=None, reference=None)
    entry = clip_entries({"path": str(clip_dir), "frames": 1}, job)["clip_score"]
    low, high = task.value_range
    frame = (frames_of(video, "BTCHW", 1)[0] - low) / (high - low)
    by_hand = _by_hand(clip_dir, frame, long_prompt)
    assert entry["value"] == pytest.approx(by_hand, rel=1e-5, abs=1e-6)
