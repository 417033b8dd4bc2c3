"""report.html: the same tables and numbers as report.md, self-contained, pictures embedded,
--no-plots too."""

from __future__ import annotations

import re
from urllib.parse import unquote

import pytest

from ascendbench.report.__main__ import main
from ascendbench.report.html import Pictures, html_document, inline, table_cells

from helpers.report_html import html_tables, markdown_tables, numbers


def _report(records, out, *extra):
    assert main([str(records), "--out", str(out), *extra]) == 0
    return (out / "report.md").read_text(), (out / "report.html").read_text(encoding="utf-8")


def test_html_tables_hold_the_cells_and_numbers_of_the_markdown(dtype_preset_records, tmp_path):
    markdown, page = _report(dtype_preset_records, tmp_path / "reports")
    md_tables, page_tables = markdown_tables(markdown), html_tables(page)
    assert len(md_tables) >= 8, \
        "accuracy, performance, pivots, recommendation, failures, environment"
    assert page_tables == md_tables
    assert numbers(page_tables) == numbers(md_tables) and len(numbers(md_tables)) > 200


def test_html_is_one_self_contained_file(dtype_preset_records, tmp_path, capsys):
    _, page = _report(dtype_preset_records, tmp_path / "reports")
    assert f"html: {tmp_path / 'reports' / 'report.html'}" in capsys.readouterr().out
    sources = re.findall(r'\b(?:src|href)="([^"]*)"', page)
    assert not [s for s in sources if re.match(r"[a-z]+://", s)], "no http(s)/file URL to fetch"
    assert "<link" not in page and "<script src" not in page and "@import" not in page
    images = re.findall(r'<img src="([^"]*)"', page)
    assert images and all(s.startswith("data:image/png;base64,") for s in images)
    plots = [p.name for p in (tmp_path / "reports" / "plots").iterdir()]
    assert len(images) == len(plots) + 4, \
        "every plot and the four npu heatmaps on disk are embedded"


def test_no_plots_still_writes_the_html(dtype_preset_records, tmp_path):
    markdown, page = _report(dtype_preset_records, tmp_path / "reports", "--no-plots")
    assert 'class="plot"' not in page and 'class="picture"' in page, \
        "no plot; the jobs' pictures still embedded"
    assert html_tables(page) == markdown_tables(markdown)


def test_a_picture_over_the_limit_stays_a_link(dtype_preset_records, tmp_path):
    _, page = _report(dtype_preset_records, tmp_path / "reports", "--no-plots", "--set",
                      "html.embed_max_mb=0.00001")
    assert "<img" not in page
    assert '<a href="../records/npu_float16_mini/images/heatmap.png">heatmap_png</a>' in page


def test_inline_markdown_becomes_escaped_html(tmp_path):
    pictures = Pictures(tmp_path, 1024)
    assert inline("0.0733 FAIL (<= 0.01) & `a|b` **passes**", pictures) == \
        "0.0733 FAIL (&lt;= 0.01) &amp; <code>a|b</code> <strong>passes</strong>"
    assert inline("[record](<dir with space/record.json>)", pictures) == \
        '<a href="dir%20with%20space/record.json">record</a>'
    assert (inline("[image_png[0]](a/b.png) [x](y)", pictures)
            == '<a href="a/b.png">image_png[0]</a> <a href="y">x</a>')
    assert table_cells(r"| a \| b | c |") == ["a | b", "c"]


def test_every_link_of_the_page_resolves_to_a_file_or_a_section(dtype_preset_records, tmp_path):
    out = tmp_path / "reports"
    _, page = _report(dtype_preset_records, out)
    ids = set(re.findall(r' id="([^"]+)"', page))
    for href in re.findall(r'<a href="([^"]+)"', page):
        if href.startswith("#"):
            assert href[1:] in ids, f"no section {href}"
        else:
            assert (out / unquote(href)).is_file(), f"dangling link {href}"


def test_past_the_page_budget_pictures_stay_links_and_the_page_says_how_many(dtype_preset_records,
                                                                             tmp_path):
    heatmap = next(dtype_preset_records.rglob("heatmap.png")).stat().st_size
    budget_mb = (2.5 * heatmap) / 2**20  # room for two of the four heatmaps
    _, page = _report(dtype_preset_records, tmp_path / "reports", "--no-plots", "--set",
                      f"html.embed_total_mb={budget_mb}")
    assert page.count("<img") == 2
    assert "2 picture(s) are links, not embedded" in page and "html.embed_total_mb" in page
    _, unlimited = _report(dtype_preset_records, tmp_path / "all", "--no-plots")
    assert unlimited.count("<img") == 4 and "are links, not embedded" not in unlimited


@pytest.mark.parametrize("option",
                         ["html.embed_total_mb=0", "html.embed_max_mb=-1",
                          "html.embed_total_mb=lots"])
def test_a_bad_embedding_limit_is_a_usage_error_naming_the_key(option, dtype_preset_records,
                                                               tmp_path, capsys):
    assert main([str(dtype_preset_records), "--out", str(tmp_path / "r"), "--set", option]) == 2
    error = capsys.readouterr().err
    assert option.split("=")[0] in error and "number > 0" in error and "Traceback" not in error


def test_a_picture_mentioned_twice_is_embedded_once(tmp_path):
    """The page holds each picture's bytes once; a later mention links to the shown figure."""
    (tmp_path / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"x" * 100)
    page = html_document("[one](a.png)\n\n[again](a.png)", tmp_path, embed_max_mb=1)
    assert page.count("data:image/png") == 1
    assert '<figure class="picture" id="figure-1">' in page
    assert '<a href="a.png">again</a> (<a href="#figure-1">shown above</a>)' in page
