"""``python -m ascendbench.report --mlflow``: records -> MLflow runs in a real SQLite store, read
back with MLflow."""

from __future__ import annotations

import os
import sys
import time

import pytest

from ascendbench.report.__main__ import main
from ascendbench.tracking import mlflow_export
from ascendbench.tracking.fields import TRUNCATED

from helpers.tracking import artifact_paths, read_runs


def _by_dtype(runs) -> dict:
    return {run.data.tags["dtype"]: run for run in runs}


def test_a_sweep_becomes_one_run_per_record(write_job, store, tmp_path, capsys):
    write_job("dtype=float32", dtype="float32", median_ms=10.0)
    write_job("dtype=float16", dtype="float16", median_ms=20.0, verdict="FAIL", psnr=float("inf"))
    write_job("dtype=bfloat16", dtype="bfloat16", status="failed")

    assert main(["--mlflow", store, str(tmp_path / "sweep")]) == 0
    assert "3 created, 0 replaced, 0 unchanged, 0 skipped, 0 failed" in capsys.readouterr().out
    runs = _by_dtype(read_runs(store))
    assert set(runs) == {"float32", "float16", "bfloat16"}

    passed, worse, failed = runs["float32"], runs["float16"], runs["bfloat16"]
    assert passed.info.status == "FINISHED" and passed.info.run_name == "dtype=float32"
    assert {k: passed.data.tags[k] for k in ("verdict", "status", "device", "model", "preset",
                                             "weights",
                                              "ascendbench.version")} == \
        {"verdict": "PASS", "status": "ok", "device": "cpu", "model": "tiny_flux2_decoder",
         "preset": "mini",
         "weights": "random-init", "ascendbench.version": "0.1.0"}
    assert passed.data.metrics["bench.latency.median_ms"] == 10.0
    assert passed.data.metrics["bench.latency.median_ci95_high_ms"] == pytest.approx(10.2)
    assert passed.data.metrics["metrics.mean_rel_err.value"] == 0.004
    # '#' is not storable
    assert passed.data.metrics["metrics.layer/blocks.0_1/0/cosine.value"] == 0.999
    assert passed.data.params["preset.height"] == "32" and passed.data.params["dry_run"] == "false"
    note = passed.data.params["model.note"]
    assert (len(note) == 6000 and note.endswith(TRUNCATED)
            and passed.data.tags["ascendbench.truncated"] == "model.note")
    assert artifact_paths(store, passed.info.run_id) == {"record.json", "compare.csv",
                                                         "images/image_device_0.png"}

    assert (worse.data.tags["verdict"] == "FAIL"
            and worse.data.metrics["bench.latency.median_ms"] == 20.0)
    assert "metrics.psnr_db.value" not in worse.data.metrics  # infinite: named in a tag instead
    assert worse.data.tags["ascendbench.nonfinite"] == "metrics.psnr_db.value=inf"

    assert failed.info.status == "FAILED" and "verdict" not in failed.data.tags
    assert failed.data.tags["status"] == "failed" and failed.data.tags["error"] == "RuntimeError"


def test_a_second_export_adds_nothing_and_a_rerun_replaces_its_run(write_job, store, tmp_path,
                                                                   capsys):
    from mlflow import MlflowClient

    write_job("dtype=float32", dtype="float32", median_ms=10.0)
    write_job("dtype=float16", dtype="float16", median_ms=20.0)
    sweep = str(tmp_path / "sweep")
    assert main(["--mlflow", store, sweep]) == 0
    first = {run.data.tags["dtype"]: run.info.run_id for run in read_runs(store)}

    assert main(["--mlflow", store, sweep]) == 0
    assert "0 created, 0 replaced, 2 unchanged" in capsys.readouterr().out
    assert {run.data.tags["dtype"]: run.info.run_id for run in read_runs(store)} == first

    # the job run again into its directory
    write_job("dtype=float16", dtype="float16", median_ms=30.0)
    assert main(["--mlflow", store, sweep]) == 0
    assert "0 created, 1 replaced, 1 unchanged" in capsys.readouterr().out
    runs = _by_dtype(read_runs(store))
    assert len(runs) == 2 and runs["float32"].info.run_id == first["float32"]
    assert runs["float16"].info.run_id != first["float16"]
    assert runs["float16"].data.metrics["bench.latency.median_ms"] == 30.0
    run = MlflowClient(tracking_uri=store).get_run(first["float16"])
    assert run.info.lifecycle_stage == "deleted"


def test_mlflow_alone_logs_to_sqlite_in_the_working_directory(write_job, tmp_path, monkeypatch):
    """``--mlflow sweep``: a value without a scheme is a records path; the store is ./mlflow.db."""
    write_job("dtype=float32", dtype="float32")
    monkeypatch.chdir(tmp_path)
    assert main(["--mlflow", "sweep", "--mlflow-experiment", "nightly"]) == 0
    runs = read_runs(f"sqlite:///{tmp_path / 'mlflow.db'}", "nightly")
    artifacts = tmp_path / "mlartifacts" / "nightly"
    assert len(runs) == 1 and runs[0].info.artifact_uri.startswith(artifacts.as_uri())
    assert (artifacts / runs[0].info.run_id / "artifacts" / "record.json").is_file()


def test_without_mlflow_the_command_says_how_to_install_it(write_job, store, tmp_path, monkeypatch,
                                                           capsys):
    write_job("dtype=float32")
    monkeypatch.setitem(sys.modules, "mlflow", None)  # `import mlflow` raises ImportError
    assert main(["--mlflow", store, str(tmp_path / "sweep")]) == 2
    err = capsys.readouterr().err
    assert "MLflow is not installed" in err and "pip install 'ascendbench[tracking]'" in err


def test_a_database_uri_without_the_sql_packages_says_how_to_install_them(store, tmp_path,
                                                                          monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "alembic", None)  # mlflow-skinny alone: no SQL layer
    assert main(["--mlflow", store, str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "lacks alembic" in err and "pip install 'ascendbench[tracking]'" in err


@pytest.mark.parametrize("uri", ["bogus://nowhere", "file:///{tmp}/mlruns"],
                         ids=["unknown-scheme", "file-store"])
def test_an_unusable_uri_is_a_usage_error(uri, write_job, tmp_path, monkeypatch, capsys):
    """MLflow 3 refuses the ./mlruns file store (unless MLFLOW_ALLOW_FILE_STORE): said, not a
    traceback."""
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    write_job("dtype=float32")
    assert main(["--mlflow", uri.format(tmp=tmp_path), str(tmp_path / "sweep")]) == 2
    err = capsys.readouterr().err
    assert "cannot be used" in err and "sqlite:///mlflow.db" in err and "Traceback" not in err


def test_a_run_left_incomplete_by_a_killed_export_is_replaced(write_job, store, tmp_path, capsys):
    """kill -9 mid-export leaves a run with the record's key but no digest tag: the next export
    replaces it."""
    from mlflow import MlflowClient

    from ascendbench.tracking.mlflow_export import KEY_TAG, RecordFile

    job = write_job("dtype=float32", dtype="float32", median_ms=10.0)
    client = MlflowClient(tracking_uri=store)
    experiment = client.create_experiment("ascendbench",
                                          artifact_location=(tmp_path / "art").as_uri())
    # no digest
    half = client.create_run(experiment, tags={KEY_TAG: RecordFile.read(job).key}).info.run_id
    assert main(["--mlflow", store, str(tmp_path / "sweep")]) == 0
    assert "0 created, 1 replaced, 0 unchanged" in capsys.readouterr().out
    runs = read_runs(store)
    assert len(runs) == 1 and runs[0].info.run_id != half
    assert runs[0].data.metrics["bench.latency.median_ms"] == 10.0
    assert client.get_run(half).info.lifecycle_stage == "deleted"


def test_mlflow_telemetry_is_off_unless_the_environment_says_otherwise(monkeypatch):
    from ascendbench.tracking.mlflow_export import import_mlflow

    monkeypatch.delenv("MLFLOW_DISABLE_TELEMETRY", raising=False)
    import_mlflow()
    assert os.environ["MLFLOW_DISABLE_TELEMETRY"] == "true"
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "false")
    import_mlflow()
    assert os.environ["MLFLOW_DISABLE_TELEMETRY"] == "false", "the user's own setting stands"


def test_a_linked_png_pointing_outside_the_job_is_not_uploaded(write_job, store, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    job_dir = write_job("dtype=float32")
    (job_dir / "images" / "passwd.png").symlink_to(secret)
    # a linked directory: not walked out
    (job_dir / "linked_dir").symlink_to(tmp_path, target_is_directory=True)
    assert main(["--mlflow", store, str(job_dir)]) == 0
    [run] = read_runs(store)
    client = mlflow_export.import_mlflow().MlflowClient(tracking_uri=store)
    uploaded = [a.path for a in client.list_artifacts(run.info.run_id, "images")]
    assert uploaded == ["images/image_device_0.png"], uploaded
    listed = [a.path for a in client.list_artifacts(run.info.run_id)]
    assert not [path for path in listed if path.startswith("linked_dir")]


def test_an_unreachable_tracking_server_gives_up_within_30_s_in_one_paragraph(write_job, tmp_path,
                                                                              monkeypatch,
                                                                            capsys):
    for name in mlflow_export.HTTP_BOUNDS:
        monkeypatch.delenv(name, raising=False)
    write_job("dtype=float32")
    start = time.monotonic()
    code = main(["--mlflow", "http://127.0.0.1:9", str(tmp_path / "sweep")])
    elapsed = time.monotonic() - start
    err = capsys.readouterr().err
    assert code == 2 and elapsed < 30, elapsed
    assert ("http://127.0.0.1:9" in err and "Traceback" not in err
            and len(err.strip().splitlines()) == 1)


def test_a_database_that_cannot_be_written_fails_at_once_in_one_paragraph(write_job, tmp_path,
                                                                          capsys, caplog):
    """/proc is read-only even for root: MLflow alone retries opening it with back-off for
    minutes; the store is refused before MLflow is asked, with no retry."""
    write_job("dtype=float32")
    assert main(["--mlflow", "sqlite:////proc/ascendbench/m.db", str(tmp_path / "sweep")]) == 2
    err = capsys.readouterr().err
    assert "/proc/ascendbench/m.db cannot be written" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert "retried" not in caplog.text + err
