"""Resume: only an ok record of the very same config is reused; a killed job's record never is."""

from __future__ import annotations

import logging

from omegaconf import OmegaConf

from ascendbench.job.record import RecordWriter
from ascendbench.job.resume import finished_record

TINY = ["model=tiny_flux2_decoder", "device=cpu", "preset.height=32", "preset.width=32"]


def _write(job_dir, cfg, status="ok"):
    writer = RecordWriter(job_dir, OmegaConf.to_container(cfg, resolve=True))
    # an ok job kept its outputs
    writer.data["outputs"] = {"image": {"shape": [1, 3, 32, 32], "dtype": "float32"}}
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


def test_an_unreadable_record_is_not_resumed_and_does_not_raise(compose_cfg, tmp_path, caplog):
    cfg = compose_cfg(["model=tiny_flux2_decoder"])
    (tmp_path / "record.json").write_text("[" * 100_000 + "]" * 100_000)
    with caplog.at_level(logging.WARNING, logger="ascendbench.job.resume"):
        assert finished_record(cfg, tmp_path) is None
    assert "RecursionError" in caplog.text


def test_weights_identity_decides_with_stat_then_digest(compose_cfg, tmp_path, tiny_flux2_dir):
    import shutil

    from ascendbench.job.resume import files_stat, weights_change, weights_files
    from ascendbench.models.sources import files_digest

    source = tmp_path / "ckpt"
    shutil.copytree(tiny_flux2_dir, source)
    cfg = compose_cfg(["model=tiny_flux2_decoder", f"model.source={source}",
                       "model.weights=required"])
    files = weights_files(cfg)
    assert files and all(f.suffix == ".safetensors" for f in files)
    record = {"weights": {"kind": "loaded", "digest": files_digest(files),
                          "files_stat": files_stat(files)}}
    assert weights_change(cfg, record) is None
    stale_stat = {"weights": {**record["weights"], "files_stat": []}}
    assert weights_change(cfg,
                          stale_stat) is None, "a touched but identical file: the digest decides"
    other = {"weights": {"kind": "loaded", "digest": "sha256:0", "files_stat": []}}
    assert "changed" in weights_change(cfg, other)
    assert "now found" in weights_change(cfg, {"weights": {"kind": "random-init"}})
