"""False verdicts: a job whose accuracy nothing judged, a reference that is the device output
itself, and a comparison of empty tensors must not say PASS (each shown on the real CLI or entry
point)."""

from __future__ import annotations

import json

import torch
from safetensors.torch import load_file, save_file

from ascendbench.baseline.store import BaselineStore
from ascendbench.compare.__main__ import main as compare_main


def test_a_job_whose_accuracy_no_evaluator_judged_does_not_say_pass(app, fast, record_of):
    code, output, job_dir = app(
        "model=tiny_flux2_decoder",
        *fast,
        "dtype=bfloat16",
        "metric.evaluators.regression=null",
        "metric.evaluators.image=null",
    )
    record = record_of(job_dir)
    assert code == 0 and record["status"] == "ok", output[-3000:]
    assert record["metrics"]["output_nonfinite"]["verdict"] == "PASS", (
        "only the sanity checks were judged"
    )
    assert record["verdict"] is None, "the accuracy was not judged: no PASS"
    assert "verdict PASS" not in output


def test_a_cached_reference_equal_to_the_bfloat16_output_is_flagged(
    app, fast, record_of, cache_dir, tmp_path
):
    job = ("model=tiny_flux2_decoder", *fast, "dtype=bfloat16", "fail_on=null")
    code, output, first = app(*job, out_dir=tmp_path / "first")
    assert code == 0, output[-3000:]
    assert "reference_identical" not in record_of(first)["metrics"], (
        "the honest bfloat16 job is not flagged"
    )
    key = record_of(first)["baseline"]["cache_key"]
    store = BaselineStore(cache_dir)
    device = load_file(str(first / record_of(first)["artifacts"]["device_outputs"]))
    # Replaced consistently: the outputs, their digest and shapes in meta.json, so the cache
    # verifies on read.
    store.write_outputs(key, {name: t.double() for name, t in device.items()}, store.read_meta(key))
    code, output, second = app(*job, out_dir=tmp_path / "second")
    record = record_of(second)
    assert (
        record["baseline"]["cache_hit"] is True and record["metrics"]["max_abs_err"]["value"] == 0.0
    )
    assert record["metrics"]["reference_identical"]["verdict"] == "FAIL"
    assert record["verdict"] == "FAIL"


def test_compare_of_two_empty_tensors_is_not_a_pass(tmp_path, capsys):
    for side in ("ref", "cand"):
        save_file({"image": torch.zeros(0, 3, 8, 8)}, str(tmp_path / f"{side}.safetensors"))
    code = compare_main(
        [
            str(tmp_path / "ref.safetensors"),
            str(tmp_path / "cand.safetensors"),
            "--out",
            str(tmp_path / "out"),
        ]
    )
    captured = capsys.readouterr()
    assert code == 2 and "no elements" in captured.err
    assert "verdict PASS" not in captured.out


def _edit_record(job_dir, edit) -> None:
    path = job_dir / "record.json"
    record = json.loads(path.read_text())
    edit(record)
    path.write_text(json.dumps(record))


def _judged_metric(record) -> str:
    return next(
        name
        for name, m in record["metrics"].items()
        if m.get("verdict") == "PASS" and "nonfinite" not in name
    )


def _drop_outputs(record) -> None:
    record.pop("outputs")  # an ok record that kept no outputs at all


def _fail_one_metric(record) -> None:
    record["metrics"][_judged_metric(record)]["verdict"] = (
        "FAIL"  # the metrics say FAIL, the verdict still PASS
    )


def test_resume_does_not_skip_a_record_that_does_not_hold_up(app, fast, record_of):
    job = ("model=tiny_flux2_decoder", *fast, "dtype=float32")
    code, output, job_dir = app(*job)
    assert code == 0 and record_of(job_dir)["verdict"] == "PASS", output[-3000:]
    for what, edit in (
        ("verdict-not-its-metrics", _fail_one_metric),
        ("ok-without-outputs", _drop_outputs),
    ):
        _edit_record(job_dir, edit)
        code, output, _ = app(*job)
        assert "running again" in output and "resume: skipped" not in output, what
        record = record_of(job_dir)
        assert record["outputs"] and record["verdict"] == "PASS", f"{what}: the job ran again"
        assert record["metrics"][_judged_metric(record)]["verdict"] == "PASS", what
    code, output, _ = app(*job)
    assert "resume: skipped" in output, "the re-run record is resumed"
