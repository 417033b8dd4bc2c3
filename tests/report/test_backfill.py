"""README back-fill: known markers replaced, unknown ones untouched, idempotent, seed markers
understood."""

from __future__ import annotations

import pytest

from ascendbench.errors import ReportError
from ascendbench.report.__main__ import main
from ascendbench.report.backfill import PLACEHOLDER, backfill_file, fill, marker_names

from helpers.seeds import SEEDS, seed_text

README = """# My port

Intro stays.

<!-- ascendbench:accuracy -->
old accuracy text
<!-- /ascendbench:accuracy -->

Between stays.

<!-- ascendbench:mystery -->
keep me
<!-- /ascendbench:mystery -->

<!-- ACCURACY_TABLE_BEGIN -->
| to be filled |
<!-- ACCURACY_TABLE_END -->

<!-- ascendbench:performance --><!-- /ascendbench:performance -->
Outro stays.
"""


def test_fill_replaces_known_and_keeps_unknown():
    text, unknown = fill(README, lambda name: f"NEW {name}")
    assert unknown == ["mystery"]
    assert "old accuracy text" not in text and "to be filled" not in text
    assert "<!-- ascendbench:accuracy -->\nNEW accuracy\n<!-- /ascendbench:accuracy -->" in text
    assert ("<!-- ACCURACY_TABLE_BEGIN -->\nNEW per_resolution\n<!-- ACCURACY_TABLE_END -->"
            in text), "the seed table"
    assert ("<!-- ascendbench:performance -->\nNEW performance\n<!-- /ascendbench:performance -->"
            in text)
    assert "keep me" in text
    for kept in ("Intro stays.", "Between stays.", "Outro stays."):
        assert kept in text


def test_fill_is_idempotent():
    once, _ = fill(README, lambda name: f"NEW {name}\n| a | b |")
    twice, _ = fill(once, lambda name: f"NEW {name}\n| a | b |")
    assert once == twice
    assert marker_names(once) == marker_names(README)


def test_backfill_file_with_real_records_twice_is_stable(write_record, tmp_path):
    write_record("npu_fp16")
    write_record("npu_bf16", dtype="bfloat16", mean_rel_err=0.07)
    readme = tmp_path / "docs" / "README.md"
    readme.parent.mkdir()
    readme.write_text(README)
    args = [str(tmp_path / "records"), "--out", str(tmp_path / "reports"), "--readme", str(readme),
            "--no-plots"]
    assert main(args) == 0
    first = readme.read_text()
    assert "| 7% FAIL |" in first and "rule mean_rel_err: <= 1%" in first
    assert "(../records/npu_bf16/record.json)" in first, "links relative to the README"
    assert main(args) == 0
    assert readme.read_text() == first


def test_backfill_needs_an_existing_file_with_markers(tmp_path):
    with pytest.raises(ReportError, match="does not exist"):
        backfill_file(tmp_path / "nope.md", lambda base: lambda name: "")
    plain = tmp_path / "plain.md"
    plain.write_text("# nothing to fill\n")
    with pytest.raises(ReportError, match="holds no ascendbench marker"):
        backfill_file(plain, lambda base: lambda name: "")


def test_a_readme_that_is_a_link_is_filled_where_it_lives_and_stays_a_link(tmp_path):
    """The atomic rewrite replaces a file by rename: done at the link's path it would turn the
    user's link into a regular copy and leave the file it pointed at unfilled."""
    target = tmp_path / "repo" / "README.md"
    target.parent.mkdir()
    target.write_text(README)
    link = tmp_path / "README.md"
    link.symlink_to(target)
    backfill_file(link, lambda base: lambda name: f"filled {name} from {base.name}")
    assert link.is_symlink() and link.resolve() == target.resolve()
    assert ("filled accuracy from repo" in target.read_text() and "Intro stays."
            in target.read_text())


def _table(*rows: list[str]) -> str:
    header = ["分辨率", "帧数", "Steps", "MaxDiff", "CosSim", "PSNR", "SSIM", "判定"]
    lines = [header, ["---"] * len(header), *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines) + "\n- note"


@pytest.mark.skipif(not SEEDS.is_dir(), reason=f"the seed reports are not at {SEEDS}")
def test_the_sulphur_seed_document_keeps_its_sentence_and_gets_its_placeholder_rows(tmp_path):
    """The seed's 8.3 line names both markers inside a sentence: no pair; its placeholder table is
    filled row by row from the runs of the same resolution, frames and steps."""
    readme = tmp_path / "README.md"
    readme.write_text(original := seed_text("000"))
    mini = ["256x256", "9", "50", "0.000391", "0.999998", "49.77", "0.9994", "PASS"]
    balanced = ["512x320", "65", "50", "0.000512", "0.999991", "41.20", "0.9901", "PASS"]
    kept = backfill_file(readme, lambda base: lambda name: _table(mini, balanced))
    assert kept == ["1 placeholder row(s) with no judged run of their size"]
    filled = readme.read_text().splitlines()
    sentence = next(line for line in original.splitlines() if "ACCURACY_TABLE_BEGIN" in line)
    assert sentence in filled, "the sentence about the markers is not split"
    assert "\t".join(mini) in filled and "\t".join(balanced) in filled, "in the seed's own form"
    assert sum(PLACEHOLDER in line for line in filled) == 1, "quality has no run: it stays"
    changed = [(a, b) for a, b in zip(original.splitlines(), filled, strict=True) if a != b]
    assert len(changed) == 2 and all(PLACEHOLDER in a for a, _ in changed), "nothing else"


def test_markers_only_inside_sentences_are_refused_naming_the_lines(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# Port\n\nCopy the table between <!-- ACCURACY_TABLE_BEGIN --> and "
                      "<!-- ACCURACY_TABLE_END --> by hand.\n")
    before = readme.read_text()
    with pytest.raises(ReportError, match=r"line 3: .*a line of its own"):
        backfill_file(readme, lambda base: lambda name: _table())
    assert readme.read_text() == before
    assert main([str(tmp_path), "--out", str(tmp_path / "r"), "--readme", str(readme),
                 "--no-plots"]) == 2


def test_a_placeholder_table_between_markers_stays_when_nothing_was_judged(tmp_path):
    """No judged run: the section is a sentence (no table); the author's rows are not replaced by
    it (in whatever language it is written)."""
    readme = tmp_path / "README.md"
    table = ("| 分辨率 | 帧数 | Steps | 判定 |\n|---|---|---|---|\n"
             f"| 256x256 | 9 | 50 | {PLACEHOLDER} |")
    readme.write_text(f"<!-- ACCURACY_TABLE_BEGIN -->\n{table}\n<!-- ACCURACY_TABLE_END -->\n")
    before = readme.read_text()
    kept = backfill_file(readme, lambda base: lambda name: "No judged run of a task with steps.")
    assert readme.read_text() == before
    assert kept == ["1 placeholder row(s) with no judged run of their size"]


def test_a_directory_or_a_file_that_is_not_utf8_is_named_as_such(tmp_path):
    with pytest.raises(ReportError, match="is a directory"):
        backfill_file(tmp_path, lambda base: lambda name: "")
    gbk = tmp_path / "README.md"
    gbk.write_bytes("<!-- ACCURACY_TABLE_BEGIN -->\n待实测填充\n<!-- ACCURACY_TABLE_END -->\n"
                    .encode("gbk"))
    with pytest.raises(ReportError, match="is not UTF-8 text"):
        backfill_file(gbk, lambda base: lambda name: "")
    assert gbk.read_bytes().decode("gbk").count("待实测填充") == 1, "left as it was"
