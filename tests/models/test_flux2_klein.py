"""model=flux2_klein: the seed's pipeline (FLUX.2-klein-4B with the small decoder), planned on the
meta device with memory per component, refused where it does not fit, and on a diffusers without
Flux2KleinPipeline; ``model.vae`` picks the decoder."""

from __future__ import annotations

import diffusers
import pytest
from hydra.utils import instantiate

from ascendbench.errors import MissingPackageError
from ascendbench.models import memory

from helpers import read_record

GB = 1024**3


def test_the_dry_run_plans_each_component_and_refuses_float32_on_24_gib(cli, monkeypatch):
    monkeypatch.setattr(memory, "measured_host_bytes", lambda: 24 * GB)
    result, job = cli("model=flux2_klein", "device=cpu", "dry_run=true",
                      "model.source=/nonexistent/flux2-klein")
    out = result.stdout + result.stderr
    assert "text_encoder 4.022B, transformer 3.876B, vae 0.062B" in out
    assert "refusing to allocate random-init diffusers.Flux2KleinPipeline" in out
    assert "`model=tiny_flux2_klein`" in out and "load_dtype=bfloat16" in out
    assert read_record(job)["status"] != "ok"


@pytest.mark.parametrize("vae, source, widths", [
    ("small", "black-forest-labs/FLUX.2-small-decoder", [96, 192, 384, 384]),
    ("standard", None, [128, 256, 512, 512])])
def test_model_vae_picks_the_decoder(compose_cfg, vae, source, widths):
    cfg = compose_cfg(["model=flux2_klein", f"model.vae={vae}"])
    assert cfg.model.loader.vae.source == source
    assert list(cfg.model.loader.components.vae.config.decoder_block_out_channels) == widths
    loader = instantiate(cfg.model.loader)
    assert ("vae" in loader.objects) == (source is not None), "passed as an object, as the seed"


def test_a_diffusers_without_flux2_klein_is_refused_naming_the_version(compose_cfg,
                                                                      monkeypatch):
    lazy = type(diffusers)
    real = lazy.__getattr__

    def without(self, name):
        if name == "Flux2KleinPipeline":
            raise AttributeError(name)
        return real(self, name)

    monkeypatch.delattr(diffusers, "Flux2KleinPipeline", raising=False)
    monkeypatch.setattr(lazy, "__getattr__", without)
    loader = instantiate(compose_cfg(["model=tiny_flux2_klein"]).model.loader)
    with pytest.raises(MissingPackageError, match=r"has no Flux2KleinPipeline\. .*diffusers >= "
                                                  r"0\.37 .*pip install -U 'diffusers>=0\.37'"):
        loader.load(None, "random", 42)


def test_the_dry_run_in_bfloat16_prints_each_component_s_memory(cli, monkeypatch):
    monkeypatch.setattr(memory, "measured_host_bytes", lambda: 24 * GB)
    result, job = cli("model=flux2_klein", "device=cpu", "dry_run=true", "dtype=bfloat16",
                      "model.loader.load_dtype=bfloat16", "model.source=/nonexistent/flux2-klein")
    out = result.stdout + result.stderr
    assert "text_encoder 4.022B (8.045 GB), transformer 3.876B (7.751 GB)" in out, out[-3000:]
    assert "vae 0.062B (0.125 GB)" in out  # the small decoder, as model.vae=small says
    components = read_record(job)["plan"]["memory"]["components"]
    assert components["transformer"] == {"num_params": 3_875_544_576, "gb": 7.751}
