"""Reports at real scale: hidden states folded per check, sweep order, frames/steps, new columns."""

from __future__ import annotations

import pandas as pd
import pytest

from ascendbench.report.__main__ import main
from ascendbench.report.gather import load_row, records_frame
from ascendbench.report.hidden import first_divergent, hidden_fields

COMPACT_COLUMNS = 10  # the most columns a table has that pastes into a README

SEED_README = """# Sulphur-2-base on Ascend

<!-- ACCURACY_TABLE_BEGIN -->
| 分辨率 | 帧数 | Steps | ... |
| 256x256 | 9 | 50 | 待实测填充 |
<!-- ACCURACY_TABLE_END -->
"""


def _report(tmp_path, *extra):
    out = tmp_path / "reports"
    assert main([str(tmp_path / "records"), "--out", str(out), "--no-plots", *extra]) == 0
    return out, (out / "report.md").read_text()


def _section(text: str, title: str) -> str:
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _tables(section: str) -> list[list[str]]:
    """Header cells of every Markdown table in ``section``."""
    lines = section.splitlines()
    return [[c.strip() for c in lines[i].strip("|").split("|")] for i in range(len(lines) - 1)
            if lines[i].startswith("|") and lines[i + 1].startswith("|---")]


def test_hidden_state_checks_fold_to_the_worst_value_over_layers_and_calls(write_t2v_record):
    worst = {"layer": "transformer.transformer_blocks.1#37/0", "max_abs_err": 0.004,
             "cosine": 0.9991}
    row = load_row(write_t2v_record("a", worst=worst))
    assert row["hidden.max_abs_err.value"] == 0.004, "max of max_abs_err"
    assert row["hidden.cosine.value"] == 0.9991, "min of cosine"
    assert (row["hidden.max_abs_err.at"] == row["hidden.cosine.at"]
            == "transformer.transformer_blocks.1#37/0")
    assert (row["hidden.max_abs_err.verdict"] == "FAIL" and row["hidden.max_abs_err.rule"]
            == "<= 0.001")
    assert row["hidden.max_abs_err.layers"] == 100, "2 blocks x 50 calls"
    assert row["hidden.first_divergent"] == "transformer.transformer_blocks.1#37/0"


def test_first_divergent_is_the_first_failure_in_capture_order_or_the_all_mode_answer():
    metrics = {"layer/b.0#0/0/cosine": {"value": 0.5, "verdict": "FAIL", "rule": ">= 0.9999"},
               "layer/b.1#0/0/cosine": {"value": 0.1, "verdict": "FAIL", "rule": ">= 0.9999"}}
    results = {"b.0#0/0": {"result": "PASS"}, "b.1#0/0": {"result": "FAIL"},
               "b.0#1/0": {"result": "FAIL"}}
    assert first_divergent(metrics, {"mode": "patterns", "results": results}) == "b.1#0/0"
    assert first_divergent(metrics,
                           None) == "b.0#0/0", "without compare.results: the metrics' order"
    assert (first_divergent({}, {"mode": "all", "first_divergent": "vae.decoder.up.2"})
            == "vae.decoder.up.2")
    fields = hidden_fields(metrics, None)
    assert fields["hidden.cosine.value"] == 0.1 and fields["hidden.cosine.at"] == "b.1#0/0"
    assert hidden_fields({"video/mae": {"value": 1.0}},
                         None) == {}, "no layer entries, no hidden fields"


def test_t2v_sweep_report_is_compact_by_default_and_the_columns_are_a_choice(write_t2v_record,
                                                                             tmp_path):
    write_t2v_record("preset=mini", preset="mini")
    write_t2v_record("preset=balanced", preset="balanced", height=320, width=512, frames=65)
    out, text = _report(tmp_path)
    tables = _tables(_section(text, "Accuracy"))
    assert tables and all(len(headers) <= COMPACT_COLUMNS
                          for headers in tables), ([len(h) for h in tables])
    assert not any("layer/" in h for headers in tables for h in headers), "no per-layer column"
    video = tables[0]
    for wanted in ("workload", "max_abs_err", "hidden max_abs_err (worst)",
                   "hidden cosine (worst)", "verdict"):
        assert wanted in video, wanted
    for shared in ("device cpu", "dtype float32", "steps 50", "batch 1",
                   "first divergent module none"):
        assert f"every row: {shared}" in text, f"a column saying {shared} in every row is one note"
    chosen = _tables(_section(_report(tmp_path, "--set", "accuracy.show=[mae,mse,max_rel_err]")[1],
                              "Accuracy"))[0]
    assert [h for h in chosen if h in ("mae", "mse", "max_rel_err", "mean_rel_err", "cosine")] == [
        "mae", "mse", "max_rel_err"], chosen
    layers = pd.read_csv(out / "layers.csv")
    assert len(layers) == 2 * 2 * 50, "every layer entry of both jobs in layers.csv"
    assert not any(c.startswith("metrics.layer/") for c in pd.read_csv(out / "records.csv").columns)
    detail = _section(text, "Hidden states per layer")
    assert detail.count("| transformer.transformer_blocks.") == 4, "one row per job x hooked module"


def test_rows_follow_the_sweep_order_not_the_alphabet(write_t2v_record, write_record, tmp_path):
    for name, preset in (("a", "quality"), ("b", "mini"), ("c", "balanced")):
        write_t2v_record(name, preset=preset, calls=2)
    for dtype in ("bfloat16", "float16", "float32"):
        for batch in (2, 1):
            write_record(f"flux-{dtype}-{batch}", dtype=dtype, batch=batch)
    frame = records_frame([tmp_path / "records"])
    t2v = frame[frame["job.model"] == "tiny_ltx2_t2v"]
    assert list(t2v["job.preset"]) == ["mini", "balanced", "quality"]
    flux = frame[frame["job.model"] == "flux2_small_decoder"]
    assert list(zip(flux["job.batch_size"], flux["job.dtype"], strict=True)) == [
        (1, "float32"), (1, "float16"), (1, "bfloat16"), (2, "float32"), (2, "float16"),
        (2, "bfloat16")]
    _, text = _report(tmp_path)
    accuracy = _section(text, "Accuracy")
    mini, balanced = accuracy.index("| mini @"), accuracy.index("| balanced @")
    assert mini < balanced < accuracy.index("| quality @")


def test_size_has_frames_and_steps_from_the_records_config(write_t2v_record, write_record,
                                                           tmp_path):
    row = load_row(write_t2v_record("v", preset="balanced", height=320, width=512, frames=65,
                                    steps=50, calls=2))
    assert (row["job.num_frames"], row["job.steps"]) == (65, 50)
    assert "job.num_frames" not in load_row(write_record("img")), "an image decode uses neither"
    _, text = _report(tmp_path)
    line = next(r for r in _section(text, "Accuracy").splitlines() if "| balanced @" in r)
    assert "| balanced @ 320x512x65 | 50 |" in line


def test_performance_shows_min_max_p95_and_model_load_time(write_t2v_record, tmp_path):
    write_t2v_record("v", calls=2)
    _, text = _report(tmp_path, "--set", "performance.show=[all]")
    performance = _section(text, "Performance")
    headers = _tables(performance)[0]
    for wanted in ("min ms", "max ms", "p95 ms", "load s", "steps"):
        assert wanted in headers, wanted
    line = next(r for r in performance.splitlines() if "| cpu |" in r)
    assert "| 2806 |" in line and "| 44052 |" in line and "| 30970 |" in line and "| 3.39 |" in line


@pytest.mark.parametrize("marker", ["ACCURACY_TABLE", "ascendbench:per_resolution"])
def test_seed_per_resolution_table_is_back_filled(write_t2v_record, tmp_path, marker):
    write_t2v_record("mini", calls=2)
    write_t2v_record("balanced", preset="balanced", height=320, width=512, frames=65, calls=2,
                     worst={"layer": "transformer.transformer_blocks.0#1/0", "max_abs_err": 0.002,
                            "cosine": 0.99})
    readme = tmp_path / "README.md"
    readme.write_text(SEED_README if marker == "ACCURACY_TABLE" else
                      "<!-- ascendbench:per_resolution -->\n<!-- /ascendbench:per_resolution -->\n")
    _report(tmp_path, "--readme", str(readme))
    text = readme.read_text()
    assert "待实测填充" not in text
    assert ("| Resolution | Frames | Steps | hidden MaxDiff | hidden CosSim | PSNR | SSIM | "
            "verdict | record |"
            in text)
    assert "| 256x256 | 9 | 50 | 1e-06 PASS | 1 PASS | 135.1 PASS | 0.999 PASS | PASS † |" in text
    assert ("| 320x512 | 65 | 50 | 0.002 FAIL | 0.99 FAIL | 135.1 PASS | 0.999 PASS | FAIL (hidden."
            "max_abs_err 0.002 > 0.001, hidden.cosine 0.99 < 0.9999) † |" in text), \
        "the verdict cell names each failing rule with its value"
