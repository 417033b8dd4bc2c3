"""The metric a report section shows is the one the task declares, never the first name in sort
order."""

from __future__ import annotations

from ascendbench.report.plots import _error_points
from ascendbench.report.seedlayouts import resolution_table

PSNR, SSIM = ["psnr_db_mean", "psnr_db"], ["ssim_mean", "ssim"]


def _metric(row: dict, name: str, value: float, rule: str | None = None) -> None:
    row[f"metrics.{name}.value"] = value
    row[f"metrics.{name}.verdict"] = None if rule is None else "PASS"
    row[f"metrics.{name}.rule"] = rule


def _tokenizer_row(tmp_path) -> dict:
    """A pretrained tokenizer job: reconstruction PSNR 22.4 dB, its random-init control 12.72 dB."""
    row = {"record": str(tmp_path / "r" / "record.json"),
           "job.task": "ascendbench.tasks.VideoTokenizerTask",
           "job.height": 32, "job.width": 32, "job.num_frames": 9, "job.steps": 2,
           "verdict": "PASS",
           "job.primary.output": "reconstruction", "job.primary.psnr": "gate/recon_psnr_db"}
    _metric(row, "gate/control_psnr_db", 12.72)
    _metric(row, "gate/recon_psnr_db", 22.4, ">= 15")
    return row


def test_the_tokenizer_row_shows_the_reconstruction_psnr_not_the_random_init_control(tmp_path):
    table = resolution_table([_tokenizer_row(tmp_path)], PSNR, SSIM, tmp_path)
    assert "22.4 PASS" in table and "12.72" not in table


def _t2v_row(declared: bool) -> dict:
    row = {"job.device": "cpu", "job.dtype": "bfloat16", "job.preset": "mini", "job.height": 32,
           "job.width": 32,
           "job.num_frames": 9}
    if declared:
        row.update({"job.primary.output": "video", "job.primary.error": "mean_rel_err"})
    _metric(row, "audio/mean_rel_err", 0.008, "<= 0.01")
    _metric(row, "video/mean_rel_err", 0.068, "<= 0.01")
    return row


def test_the_t2v_error_plot_shows_the_failing_video_error_not_the_audio_error():
    [(device, label, value)] = _error_points([_t2v_row(declared=True)], "mean_rel_err")
    assert value == 0.068 and device == "cpu" and "32x32x9" in label


def test_an_undeclared_record_with_two_outputs_shows_neither_rather_than_the_first_by_name():
    assert _error_points([_t2v_row(declared=False)], "mean_rel_err") == []
