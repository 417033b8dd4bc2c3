"""The verdict contract of the reference-free output checks, end to end through the CLI: judged
only where the input is natural for them (pipeline outputs), never for random-init weights nor for
decoded random latents, where they are reported with what the rule would say; NaN/Inf and a planted
black video from loaded weights still fail. Each case failed on the code that judged them everywhere
but for random-init weights (and the range rule even there)."""

from __future__ import annotations

import pytest

from ascendbench.metrics.output_checks import NOT_JUDGED, NOT_NATURAL

import helpers.planted  # noqa: F401  (registers the planted_output_fault patch)
from helpers import TINY_RUN, read_record
from helpers.config import ltx_single_file_layout

QUICK = ["bench.flops.enabled=false", "baseline.process=in-process", "artifacts.media=false",
         "compare.visual.enabled=false"]
TINY_TAESD = """\
# A YAML-only model: diffusers.AutoencoderTiny with 2 blocks (2x), random-init.
defaults:
  - task: vae_decode
  - override /metric@_global_.metric: image
  - _self_

name: tiny_taesd
source: null
weights: random
init_seed: ${seed}
loader:
  _target_: ascendbench.models.loader.DiffusersLoader
  class_path: diffusers.AutoencoderTiny
  allow_pickle: ${model.allow_pickle}
  architecture:
    encoder_block_out_channels: [8, 8]
    decoder_block_out_channels: [8, 8]
    num_encoder_blocks: [1, 1]
    num_decoder_blocks: [1, 1]
    latent_channels: 4
task:
  spatial_compression: 2
"""


def _reported(record: dict, reason: str) -> dict[str, str]:
    """Output check -> what its rule would say, asserting none of them was judged."""
    checks = {name: entry for name, entry in record["metrics"].items()
              if name.split("/")[-1].startswith("output_") and "skipped" not in entry
              and not name.endswith("output_nonfinite")}
    assert checks and all(e["verdict"] is None and e["not_judged"] == reason
                          for e in checks.values()), checks
    return {name: entry["would_be"] for name, entry in checks.items()}


def test_a_yaml_only_random_init_model_exits_0_with_no_output_check_verdict(cli, tmp_path):
    conf = tmp_path / "my_conf" / "model"
    conf.mkdir(parents=True)
    (conf / "tiny_taesd.yaml").write_text(TINY_TAESD)
    result, job = cli(f"--config-dir={conf.parent}", "model=tiny_taesd", *TINY_RUN, *QUICK,
                      f"baseline.cache_dir={tmp_path / 'cache'}")
    assert result.returncode == 0, result.output[-3000:]
    record = read_record(job)
    assert record["weights"]["kind"] == "random-init" and record["verdict"] == "PASS"
    would_be = _reported(record, NOT_JUDGED)
    assert would_be["output_out_of_range_ratio"] == "FAIL", "the planted fault: TAESD's range"
    assert record["metrics"]["output_nonfinite"]["verdict"] == "PASS", "NaN/Inf stay judged"
    assert record["metrics"]["mean_rel_err"]["verdict"] == "PASS"


def test_a_loaded_decoder_of_random_latents_gets_no_spectral_fail(cli, tiny_flux2_dir, tmp_path):
    result, job = cli("model=tiny_flux2_decoder", f"model.source={tiny_flux2_dir}",
                      "model.weights=required", *TINY_RUN, *QUICK, "baseline.enabled=false")
    assert result.returncode == 0, result.output[-3000:]
    record = read_record(job)
    assert record["weights"]["kind"] == "loaded" and record["verdict"] is None
    assert _reported(record, NOT_NATURAL)["output_spectral_exponent"] == "FAIL", \
        "the untrained decoder's image is noise by the spectral rule: reported, not judged"
    assert record["metrics"]["output_nonfinite"]["verdict"] == "PASS"


@pytest.mark.parametrize("planted", [True, False])
def test_a_black_video_from_loaded_pipeline_weights_still_fails(cli, tmp_path, planted):
    root = ltx_single_file_layout("tiny_ltx_t2v", tmp_path / "ltx")
    black = ("model.patches=[{name:planted_output_fault,module:vae.decoder.conv_out,"
             "devices:[cpu],scale:0.0,shift:-10.0}]")
    result, job = cli("model=tiny_ltx_t2v", f"model.source={root / 'weights'}",
                      "model.weights=required", f"model.loader.config={root / 'config'}",
                      "model.loader.offline=true",
                      f"model.loader.text_encoder.source={root / 'full'}", "preset.steps=2",
                      *TINY_RUN, *QUICK, "baseline.enabled=false",
                      *([black] if planted else []))
    record = read_record(job)
    assert record["status"] == "ok" and record["weights"]["kind"] == "loaded", record.get("error")
    entry = record["metrics"]["output_black_white_frames"]
    assert entry.get("not_judged") is None, "a pipeline's output is judged"
    if planted:
        assert entry["verdict"] == "FAIL" and entry["value"] == 1.0
        assert record["verdict"] == "FAIL" and result.returncode == 1
    else:
        assert entry["verdict"] == "PASS"
