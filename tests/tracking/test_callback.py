"""``+tracking=mlflow``: a real run of the CLI logs its record as it ends; a tracking failure never
fails the job."""

from __future__ import annotations

import logging
import sys
import time

from omegaconf import OmegaConf

from ascendbench.job.launch import job_subdir
from ascendbench.report.__main__ import main
from ascendbench.tracking import mlflow_export
from ascendbench.tracking.callback import MlflowTracking

from helpers import TINY_RUN, compose_config, read_record, run_app
from helpers.tracking import read_runs

TINY_JOB = ["model=tiny_flux2_decoder", *TINY_RUN, "bench.flops.enabled=false",
            "baseline.process=in-process"]


def test_the_tracking_option_logs_the_job_and_a_later_export_adds_nothing(store, tmp_path, capsys):
    result = run_app(["+tracking=mlflow", f"hydra.callbacks.mlflow.uri='{store}'", *TINY_JOB],
                     cwd=tmp_path)
    assert result.returncode == 0, result.output[-2000:]
    record = read_record(result.job_dir)
    [run] = read_runs(store)
    assert run.data.tags["verdict"] == record["verdict"] == "PASS"
    assert run.data.tags["weights"] == record["weights"]["kind"] == "random-init"
    assert run.data.metrics["bench.latency.median_ms"] == record["bench"]["latency"]["median_ms"]
    assert "mlflow: created" in result.output

    assert main(["--mlflow", store, str(result.job_dir)]) == 0
    assert "0 created, 0 replaced, 1 unchanged" in capsys.readouterr().out
    assert [r.info.run_id for r in read_runs(store)] == [run.info.run_id]


def test_a_tracking_failure_is_a_warning_and_the_job_keeps_its_record(tmp_path):
    result = run_app(["+tracking=mlflow", "hydra.callbacks.mlflow.uri='bogus://nowhere'",
                      *TINY_JOB], cwd=tmp_path)
    assert result.returncode == 0, result.output[-2000:]
    assert read_record(result.job_dir)["status"] == "ok"
    assert "mlflow tracking: the record" in result.output and "was not logged" in result.output


def test_tracking_does_not_change_a_sweep_jobs_directory():
    """Resume finds a job's record whether or not the sweep was tracked: the option is not in the
    job dir name."""
    hydra = compose_config(["+tracking=mlflow"], return_hydra_config=True).hydra
    assert "tracking" in hydra.job.config.override_dirname.exclude_keys
    assert hydra.callbacks.mlflow._target_ == "ascendbench.tracking.callback.MlflowTracking"
    assert job_subdir("dtype=float16", ["dtype=float16", "+tracking=mlflow"]) == "dtype=float16"


def test_without_mlflow_the_callback_warns_and_never_raises(write_job, store, monkeypatch, caplog):
    job_dir = write_job("dtype=float32")
    monkeypatch.setitem(sys.modules, "mlflow", None)  # `import mlflow` raises ImportError
    tries, real_import = [], mlflow_export.import_mlflow
    monkeypatch.setattr(mlflow_export, "import_mlflow", lambda: tries.append(1) or real_import())
    config = OmegaConf.create({"hydra": {"runtime": {"output_dir": str(job_dir)}}})
    callback = MlflowTracking(uri=store)
    with caplog.at_level(logging.WARNING, logger="ascendbench.tracking"):
        callback.on_job_end(config)
        callback.on_job_end(config)  # the next job: warned again, without a new attempt to connect
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and all("pip install 'ascendbench[tracking]'" in w for w in warnings)
    assert len(tries) == 1 and (job_dir / "record.json").is_file()


def test_an_unreachable_tracking_server_neither_holds_the_finished_job_nor_calls_it_interrupted(
        tmp_path, monkeypatch):
    for name in mlflow_export.HTTP_BOUNDS:
        monkeypatch.delenv(name, raising=False)
    start = time.monotonic()
    result = run_app(["+tracking=mlflow", "hydra.callbacks.mlflow.uri='http://127.0.0.1:9'",
                      *TINY_JOB], cwd=tmp_path)
    elapsed = time.monotonic() - start
    assert result.returncode == 0, result.output[-2000:]
    assert read_record(result.job_dir)["status"] == "ok"
    assert "was not logged" in result.output and "interrupted" not in result.output
    assert elapsed < 90, f"the job took {elapsed:.0f} s with an unreachable tracking server"
