"""Resume: only an ok record of the very same config is reused; a killed job's record never is."""

from __future__ import annotations

import logging

from omegaconf import OmegaConf

from ascendbench.job.record import RecordWriter
from ascendbench.job.resume import finished_record

TINY = ["model=tiny_flux2_decoder", "device=cpu", "preset.height=32", "preset.width=32"]


def _write(job_dir, cfg, status="ok"):
    writer = RecordWriter(job_dir, OmegaConf.to_container(cfg, resolve=True))
    if status == "running":
        writer.write()
    else:
        writer.finish(status)
    return writer.data


def test_ok_record_of_the_same_config_is_reused(compose_cfg, tmp_path, caplog):
    cfg = compose_cfg(TINY)
    written = _write(tmp_path, cfg)
    with caplog.at_level(logging.INFO, logger="ascendbench.job.resume"):
        assert finished_record(cfg, tmp_path) == written
    assert "resume: skipped" in caplog.text


def test_resume_settings_do_not_count_as_a_config_change(compose_cfg, tmp_path):
    _write(tmp_path, compose_cfg([*TINY, "resume.force=true"]))
    assert finished_record(compose_cfg(TINY), tmp_path) is not None


def test_force_disabled_other_config_and_unfinished_records_run_again(compose_cfg, tmp_path):
    cfg = compose_cfg(TINY)
    _write(tmp_path / "ok", cfg)
    assert finished_record(compose_cfg([*TINY, "resume.force=true"]), tmp_path / "ok") is None
    assert finished_record(compose_cfg([*TINY, "resume.enabled=false"]), tmp_path / "ok") is None
    assert finished_record(compose_cfg([*TINY, "seed=7"]), tmp_path / "ok") is None
    for status in ("running", "failed", "interrupted"):
        _write(tmp_path / status, cfg, status)
        assert finished_record(cfg, tmp_path / status) is None, status
    assert finished_record(cfg, tmp_path / "nothing_here") is None
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "record.json").write_text("{")
    assert finished_record(cfg, tmp_path / "broken") is None
