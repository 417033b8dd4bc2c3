"""A value just past its bound is printed with the digits that show it: report, back-fill and sweep
summary."""

from __future__ import annotations

from ascendbench.report.__main__ import main
from ascendbench.report.summary import write_summary

WORST = {"layer": "transformer.transformer_blocks.1#0/0", "max_abs_err": 0.0010004,
         "cosine": 0.99989}


def test_a_hidden_cosine_just_under_its_bound_is_never_printed_as_the_bound(write_t2v_record,
                                                                            tmp_path):
    write_t2v_record("acc", calls=2, worst=WORST)
    readme = tmp_path / "README.md"
    readme.write_text("<!-- ACCURACY_TABLE_BEGIN -->\n<!-- ACCURACY_TABLE_END -->\n")
    out = tmp_path / "reports"
    assert main([str(tmp_path / "records"), "--out", str(out), "--no-plots", "--readme",
                 str(readme)]) == 0
    _, summary_md = write_summary(tmp_path / "records")[1:]
    for text in (out.joinpath("report.md").read_text(), readme.read_text(), summary_md.read_text()):
        assert "0.99989" in text and "0.0010004" in text
        assert "0.9999 FAIL" not in text and "0.001 FAIL" not in text
