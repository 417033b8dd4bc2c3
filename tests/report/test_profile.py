"""Where the time goes in the report: per-job top operators and the operators across dtypes."""

from __future__ import annotations

import json

from ascendbench.report.__main__ import main
from ascendbench.report.gather import profile_fields
from ascendbench.report.profile import dtype_comparison, shapes_label, top_rows

from helpers import TINY_RUN, read_record

CONV = "aten::_slow_conv2d_forward"


def _op(name, total_ms, shapes=((1, 16, 8, 8),), calls=1.0, share=None):
    return {"name": name, "input_shapes": [list(s) for s in shapes], "calls": calls,
            "total_ms": total_ms,
            "mean_ms": total_ms / calls, "share": share}


def _profiled(path, top, total_ms, median_ms=None, trace=True):
    """Add a ``profile`` section (as the device run writes it) to the record at ``path``."""
    record = json.loads(path.read_text())
    median = median_ms or record["bench"]["latency"]["median_ms"]
    record["profile"] = {"calls": 3, "clock": "device", "top": top,
                         "ops_total_ms_per_call": total_ms, "measured_median_ms": median,
                         "ops_over_median": total_ms / median, "profiled_call_ms": total_ms * 1.1,
                         "ops_over_profiled_call": 1 / 1.1}
    if trace:
        record["profile"]["trace"] = "profile_trace.json"
        (path.parent / "profile_trace.json").write_text('{"traceEvents": []}')
    path.write_text(json.dumps(record))
    return path


def _section(tmp_path, *paths):
    out = tmp_path / "reports"
    assert main([*map(str, paths), "--out", str(out), "--no-plots"]) == 0
    text = (out / "report.md").read_text()
    return out, text.split("## Where the time goes (profiler)\n", 1)[1].split("\n## ", 1)[0]


def test_a_profiled_job_shows_its_top_operators_and_what_they_explain(write_record, tmp_path):
    path = _profiled(write_record("fp16", device="cuda", dtype="float16", median_ms=20.0),
                     [_op(CONV, 12.0, ((1, 16, 8, 8), (16, 16, 3, 3), (16,)), calls=8, share=0.6),
                      _op("aten::native_group_norm", 6.0, share=0.3)], total_ms=20.0)
    out, section = _section(tmp_path, tmp_path / "records")
    assert "### flux2_small_decoder cuda float16, mini 512x512, batch 1" in section
    assert ("self device time" in section
            and "add up to 20 ms per call: 1 of the timed median 20 ms" in section)
    assert "0.909 of the profiled calls' own 22 ms" in section
    assert f"| {CONV} | 1x16x8x8, 16x16x3x3, 16 | 8 | 12 | 1.5 | 60.0 % |" in section
    trace_link = section.split("[profile_trace.json](")[1].split(")")[0]
    assert (out / trace_link).resolve() == (path.parent / "profile_trace.json").resolve()
    assert "operators across dtypes" not in section, "one dtype: nothing to compare"


def test_a_sweep_compares_the_operators_across_dtypes(write_record, tmp_path):
    for dtype, conv, norm in (("float32", 30.0, 8.0), ("float16", 10.0, None),
                              ("bfloat16", 11.0, 5.0)):
        top = [_op(CONV, conv / 2),
               _op(CONV, conv / 2, shapes=((1, 32, 4, 4),))]  # two shapes, summed
        top += [_op("aten::native_group_norm", norm)] if norm else []
        _profiled(write_record(dtype, dtype=dtype, median_ms=40.0), top,
                  total_ms=conv + (norm or 0) + 1, trace=False)
    write_record("unprofiled", dtype="float16", height=1024, width=1024)
    _, section = _section(tmp_path, tmp_path / "records")
    title = "### flux2_small_decoder on npu, mini 512x512: operators across dtypes"
    assert section.count(title) == 1
    table = section.split(title, 1)[1]
    assert "| operator | float32 ms | float16 ms | bfloat16 ms |" in table
    assert f"| {CONV} | 30 | 10 | 11 |" in table
    assert "| aten::native_group_norm | 8 | not in top 2 | 5 |" in table
    assert "| all operators | 39 | 11 | 17 |" in table
    assert "| timed median | 40 | 40 | 40 |" in table
    assert "1024x1024" not in section, "a job without a profile has no table"
    assert "profile_trace.json (listed" not in section and "Trace:" not in section


def test_no_profiled_job_says_so(write_record, tmp_path):
    write_record("plain")
    assert "No job ran with `profile.enabled=true`" in _section(tmp_path, tmp_path / "records")[1]


def test_row_fields_survive_odd_sections():
    assert profile_fields(None) == {} and profile_fields("text") == {}
    fields = profile_fields({"calls": 2, "top": [_op("a", 1.0), "junk"], "nested": {"x": 1}})
    assert fields["profile.calls"] == 2 and "profile.nested" not in fields
    assert [r["name"] for r in top_rows(fields)] == ["a"]
    assert top_rows({"profile.top": "not json"}) == [] and shapes_label([]) == "none recorded"
    assert shapes_label([[2, 3], []]) == "2x3, []"
    rows = [{"job.dtype": "float32", **fields}]
    assert "| a | 1 |" in dtype_comparison(rows)


def test_a_real_tiny_sweep_is_profiled_and_reported(cli, tmp_path):
    sweep = tmp_path / "sweep"
    result, _ = cli("-m", "model=tiny_flux2_decoder", *TINY_RUN, "dtype=float32,bfloat16",
                    "profile.enabled=true",
                    "baseline.process=in-process", "compare.visual.enabled=false",
                    "artifacts.media=false",
                    f"hydra.sweep.dir={sweep}")
    assert result.returncode in (0, 1), result.stderr[-2000:]  # bfloat16 may FAIL its accuracy rule
    records = [read_record(p.parent) for p in sorted(sweep.rglob("record.json"))]
    assert len(records) == 2 and all(r["status"] == "ok" for r in records)
    for record in records:
        profile = record["profile"]
        assert profile["top"] and profile["clock"] == "cpu" and profile["profiled_call_ms"] > 0
        # operators run inside the profiled calls: they explain at most all of them (the figure
        # against the timed median, ops_over_median, is measured on a quiet host:
        # docs/performance.md)
        assert 0.2 < profile["ops_over_profiled_call"] <= 1.0 + 1e-6, profile
    _, section = _section(tmp_path, sweep)
    assert "### tiny_flux2_decoder on cpu, mini 32x32: operators across dtypes" in section
    assert "| operator | float32 ms | bfloat16 ms |" in section and "aten::" in section
    assert section.count("[profile_trace.json](") == 2
