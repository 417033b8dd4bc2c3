"""The VideoFlexTok loader on the tests' stand-in, saved with ``save_pretrained`` as upstream."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from ascendbench.errors import ConfigError, MissingPackageError, WeightsNotFoundError
from ascendbench.models.videoflextok import (
    VideoFlexTokLoader,
    check_expected,
    read_path,
    transformer_depth,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "standins"))
from videoflextok_standin import build_pretrained  # noqa: E402  (stand-in)

STANDIN = "videoflextok_standin.VideoFlexTokStandIn"
EXPECT = {"chunk_size": 9, "vae_video_sizes": [9, 8, 8], "video_preprocess_args.size": 32,
          "video_tokenizer.encoder.@depth": 1, "video_tokenizer.decoder.@depth": 2,
          "video_tokenizer.regularizer._levels": [8, 8, 8],
          "video_tokenizer.regularizer.codebook_size": 512}


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """config.json + model.safetensors of the "pretrained" stand-in."""
    path = tmp_path_factory.mktemp("videoflextok_standin")
    build_pretrained().save_pretrained(path)
    return path


def test_missing_package_says_how_to_install(monkeypatch):
    # as if not installed, whatever this host has
    monkeypatch.setitem(sys.modules, "videoflextok", None)
    with pytest.raises(MissingPackageError) as info:
        VideoFlexTokLoader().load("EPFL-VILAB/videoflextok_d18_d28", "auto")
    message = str(info.value)
    assert "'videoflextok'" in message and "--no-deps" in message and "ml-videoflextok" in message
    assert "einops mup" in message


def test_loads_with_from_pretrained_and_records_strict_load_and_config(saved):
    loaded = VideoFlexTokLoader(class_path=STANDIN, expect=EXPECT).load(str(saved), "required")
    weights = loaded.weights
    assert weights["kind"] == "loaded" and weights["digest"].startswith("sha256:")
    strict = weights["strict_load"]
    assert strict["missing"] == [] and strict["unexpected"] == []
    in_file = len(load_file(saved / "model.safetensors"))
    assert strict["tensors_in_file"] == strict["tensors_in_model"] == in_file
    assert weights["config_checks"]["mismatches"] == 0
    reference = build_pretrained().state_dict()
    assert all(torch.equal(v, reference[k]) for k, v in loaded.module.state_dict().items())


def test_missing_and_unexpected_keys_are_counted_not_hidden(saved, tmp_path):
    (tmp_path / "config.json").write_text((saved / "config.json").read_text())
    tensors = load_file(saved / "model.safetensors")
    dropped = sorted(tensors)[0]
    tensors.pop(dropped)
    tensors["leftover.from.another.model"] = torch.zeros(2)
    save_file(tensors, tmp_path / "model.safetensors")
    strict = VideoFlexTokLoader(class_path=STANDIN).load(str(tmp_path),
                                                         "required").weights["strict_load"]
    assert strict["missing"] == [dropped]
    assert strict["unexpected"] == ["leftover.from.another.model"]


def test_config_values_that_did_not_land_are_reported(saved):
    expect = {**EXPECT, "video_tokenizer.decoder.@depth": 28,
              "video_tokenizer.no_such_part.depth": 1}
    loader = VideoFlexTokLoader(class_path=STANDIN, expect=expect)
    checks = loader.load(str(saved), "required").weights["config_checks"]
    assert checks["mismatches"] == 2
    depth = checks["checks"]["video_tokenizer.decoder.@depth"]
    assert depth == {"expected": 28, "actual": 2, "ok": False}
    assert "no_such_part" in checks["checks"]["video_tokenizer.no_such_part.depth"]["error"]


def test_random_init_reads_only_config_json(saved, tmp_path):
    # no weights file at all
    (tmp_path / "config.json").write_text((saved / "config.json").read_text())
    loaded = VideoFlexTokLoader(class_path=STANDIN).load(str(tmp_path), "auto", init_seed=3)
    assert loaded.weights["kind"] == "random-init" and loaded.weights["init_seed"] == 3
    again = VideoFlexTokLoader(class_path=STANDIN).load(str(saved), "random", init_seed=3).module
    assert all(torch.equal(v, again.state_dict()[k]) for k, v in loaded.module.state_dict().items())
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["chunk_size"] == loaded.module.chunk_size


def test_required_weights_that_are_missing_say_how_to_get_them(tmp_path):
    with pytest.raises(WeightsNotFoundError, match="model.source"):
        VideoFlexTokLoader(class_path=STANDIN).load(str(tmp_path / "nowhere"), "required")


def test_random_init_without_any_config_says_what_is_needed(tmp_path):
    with pytest.raises(ConfigError, match="config.json.*model.loader.architecture"):
        VideoFlexTokLoader(class_path=STANDIN).load(str(tmp_path), "random")
    module = VideoFlexTokLoader(class_path=STANDIN, architecture={}).load(None, "random").module
    assert module.chunk_size == 9


def test_attribute_paths():
    model = build_pretrained()
    depth = transformer_depth(model.video_tokenizer.decoder)
    assert read_path(model, "video_tokenizer.decoder.@depth") == depth == 2
    assert read_path({"a": [{"b": 5}]}, "a.0.b") == 5 and read_path({"a": [1, 2, 3]}, "a.@len") == 3
    with pytest.raises(KeyError, match="'c'"):
        read_path({"a": {}}, "a.c")
    levels = {"video_tokenizer.regularizer._levels": [8, 8, 8]}
    assert check_expected(model, levels)["mismatches"] == 0
