"""Each task declares its primary output and the metric per report section (``job.primary``)."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate

EXPECTED = {
    "tiny_flux2_decoder": {"output": "image", "error": "mean_rel_err", "psnr": "image_psnr_db"},
    "tiny_ltx2_t2v": {"output": "video", "error": "mean_rel_err", "psnr": "video_psnr_db_mean"},
    "tiny_ltx_video_vae_conv_in": {"error": "mean_rel_err"},
    "tiny_videoflextok": {"output": "reconstruction", "psnr": "gate/recon_psnr_db"},
}


@pytest.mark.parametrize("model", sorted(EXPECTED))
def test_the_task_of_each_seed_twin_declares_what_its_sections_show(compose_cfg, model):
    declared = instantiate(compose_cfg([f"model={model}"]).model.task).report_declaration()
    assert EXPECTED[model].items() <= declared.items()
    assert "audio" not in declared.values() and "gate/control_psnr_db" not in declared.values()
