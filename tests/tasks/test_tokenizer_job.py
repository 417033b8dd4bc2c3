"""videoflextok_d18_d28 and its tiny twin as jobs: composition, presets, one CLI run in-process."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hydra.utils import instantiate

from ascendbench.patches.registry import parse_specs

from helpers import run_job

STANDINS = Path(__file__).resolve().parents[1] / "standins"
sys.path.insert(0, str(STANDINS))
from videoflextok_standin import build_pretrained  # noqa: E402  (stand-in)


@pytest.mark.parametrize("preset, frames, tokens",
                         [("mini", 17, [1, 5, 256]), ("balanced", 33, [1, 9, 256]),
                                                    ("quality", 65, [1, 17, 256])])
def test_presets_vary_the_clip_length_at_256(compose_cfg, preset, frames, tokens):
    cfg = compose_cfg(["model=videoflextok_d18_d28", f"preset={preset}"])
    sizes = (cfg.preset.height, cfg.preset.width, cfg.preset.num_frames, cfg.preset.steps)
    assert sizes == (256, 256, frames, 20)
    task = instantiate(cfg.model.task)
    assert task.steps == 20 and task.token_shape(1, frames) == tokens
    assert cfg.metric.name == "tokens" and cfg.metric.evaluators.tokens.codebook_size == 64000
    assert [spec.name for spec in parse_specs(cfg.model.patches)] == ["flex_attention_dense"]


def test_command_line_preset_keys_win_over_the_model_specialisation(compose_cfg):
    cfg = compose_cfg(["model=videoflextok_d18_d28", "preset.num_frames=49", "preset.steps=4"])
    steps = instantiate(cfg.model.task).steps
    assert (cfg.preset.num_frames, cfg.preset.steps, steps) == (49, 4, 4)


def test_tiny_twin_keeps_the_loader_task_patch_and_gates(compose_cfg):
    cfg = compose_cfg(["model=tiny_videoflextok"])
    assert (cfg.preset.height, cfg.preset.num_frames, cfg.preset.steps) == (32, 9, 2)
    assert cfg.model.loader._target_.endswith("VideoFlexTokLoader")
    assert cfg.model.codebook_size == 512
    assert cfg.model.thresholds.load_missing_keys["max"] == 0          # inherited
    assert cfg.model.thresholds.recon_psnr_db["min"] == 15.0           # its own


def test_a_missing_package_leaves_a_failed_record_with_the_hint(compose_cfg, tmp_path):
    cfg = compose_cfg(["model=videoflextok_d18_d28", "device=cpu",
                       "model.loader.class_path=no_such_pkg.wrappers.X"])
    record = run_job(cfg, tmp_path)
    assert record["status"] == "failed" and record["error"]["reason"] == "missing_package"
    assert "--no-deps" in record["error"]["message"]


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_cli_job_on_the_saved_standin_records_patches_and_gates(cli, tmp_path):
    weights = tmp_path / "standin"
    build_pretrained().save_pretrained(weights)
    result, job = cli("model=tiny_videoflextok", f"model.source={weights}",
                      "model.weights=required",
                      "device=cpu", "preset.warmup=0", "preset.iters=2",
                      "bench.flops.enabled=false",
                      "baseline.process=in-process", f"baseline.cache_dir={tmp_path / 'cache'}",
                      env={"PYTHONPATH": str(STANDINS)})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    record = json.loads((job / "record.json").read_text())
    assert record["status"] == "ok" and record["weights"]["kind"] == "loaded"
    assert record["patches"]["device"][0]["targets"] == {"attention": 3, "block_mask": 2}
    # the reference: an independent, unpatched check
    assert "upstream" in record["patches"]["reference"][0]["skipped"]
    gates = {k: v for k, v in record["metrics"].items() if k.startswith("gate/")}
    assert gates["gate/load_missing_keys"]["value"] == 0
    assert gates["gate/config_mismatches"]["value"] == 0
    assert gates["gate/control_psnr_gap_db"]["verdict"] == "PASS"
    assert gates["gate/control_psnr_gap_db"]["value"] > 5
    assert all(g.get("verdict") in ("PASS", None) for g in gates.values())
    fixed = gates["gate/fixed_latent_token_agreement"]  # the seed's remaining stability checks
    assert fixed["value"] == 1.0 and fixed["verdict"] == "PASS" and "seed 004" in fixed["source"]
    assert fixed["details"]["latents_from"] == "video_tokenizer.vae.encode"
    rerun = gates["gate/recon_psnr_rerun_diff_db"]
    assert rerun["value"] == 0.0 and rerun["verdict"] == "PASS"
    assert rerun["details"]["rerun_psnr_db"] == gates["gate/recon_psnr_db"]["value"]
    control_mse = gates["gate/control_psnr_db"]["details"]["control_mse"]
    assert 0 < gates["gate/recon_mse"]["value"] < control_mse
    assert record["metrics"]["tokens/token_agreement"]["value"] == 1.0
    assert record["verdict"] == "PASS" and record["inputs"]["video"]["shape"] == [1, 3, 9, 32, 32]
