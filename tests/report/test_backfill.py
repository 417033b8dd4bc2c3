"""README back-fill: known markers replaced, unknown ones untouched, idempotent, seed markers
understood."""

from __future__ import annotations

import pytest

from ascendbench.errors import ReportError
from ascendbench.report.__main__ import main
from ascendbench.report.backfill import backfill_file, fill, marker_names

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
