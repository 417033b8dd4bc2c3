"""The end-of-job summary prints verdict-bearing values with the digits their rules need."""

from __future__ import annotations

from ascendbench.job.summary import summary_lines


def test_a_cosine_just_under_its_bound_is_not_printed_as_the_bound():
    record = {"job": {"model": "m"}, "verdict": "FAIL", "metrics": {
        "video/cosine": {"value": 0.99989, "verdict": "FAIL", "threshold": 0.9999,
                         "rule": ">= 0.9999"},
        "video/mean_rel_err": {"value": 0.068, "verdict": "FAIL", "threshold": 0.01,
                               "rule": "<= 0.01"}}}
    text = "\n".join(summary_lines(record, "record.json"))
    assert "video/cosine 0.99989 FAIL (>= 0.9999)" in text
    assert "0.9999 FAIL" not in text.replace("0.99989", "")
    assert "video/mean_rel_err 6.8% FAIL (<= 1%)" in text


def test_the_summary_names_sizes_and_the_tasks_declared_gate_values():
    record = {"job": {"model": "tiny_videoflextok", "height": 32, "width": 32, "num_frames": 9,
                      "steps": 2,
                      "primary": {"output": "reconstruction", "psnr": "gate/recon_psnr_db"}},
              "verdict": "PASS",
              "metrics": {"gate/recon_psnr_db": {"value": 22.4, "verdict": "PASS", "rule": ">= 15"},
                                             "gate/control_psnr_db": {"value": 12.72}}}
    text = "\n".join(summary_lines(record, "record.json"))
    assert "size 32x32x9  steps 2" in text
    assert "gate/recon_psnr_db 22.4 [PASS >= 15]" in text and "control_psnr_db" not in text


def test_a_long_skip_reason_is_printed_in_full_once_per_process():
    reason = ("AlexNet weights not available offline: "
              + "copy alexnet.pth into the torch hub cache " * 8)
    record = {"job": {}, "metrics": {"video/video_lpips_mean": {"skipped": reason}}}
    seen: set[str] = set()
    first = "\n".join(summary_lines(record, "a/record.json", seen))
    second = "\n".join(summary_lines(record, "b/record.json", seen))
    assert reason in first and reason not in second and "(as in the summary above)" in second
    assert reason in "\n".join(summary_lines(record,
                                             "c/record.json")), "a summary alone says it in full"
