"""report.html in a real headless Chromium: nothing fetched, no script error, every picture drawn,
tables sort.

Runs the system's Chromium (Debian's ``chromium``; CI installs it) through Playwright's sync API,
offline: the flags below keep Chromium from reaching for the network on its own. The screenshot is a
test artifact, kept in ``tmp_path`` and copied to ``$ASCENDBENCH_TEST_ARTIFACTS`` when set.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from ascendbench.report.__main__ import main

from helpers import run_cli
from helpers.report_html import html_tables, markdown_tables

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LOCAL = ("file:", "data:")
COLUMN = """(table, name) => {
  const i = [...table.tHead.rows[0].cells].findIndex(c => c.textContent === name);
  return [...table.tBodies[0].rows].map(r => r.cells[i].textContent);
}"""


@pytest.fixture
def browser():
    """A headless system Chromium; skipped (saying why) without it or without Playwright."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed: "
                                   "pip install -e '.[browser]' (the dev extra has it)")
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"no Chromium at {CHROMIUM} or on PATH: apt-get install chromium (as CI does)")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, dtype_preset_records, tmp_path):
    """report.html of the 2 dtype x 2 preset records, loaded; ``page.events`` holds errors and
    requests."""
    out = tmp_path / "reports"
    assert main([str(dtype_preset_records), "--out", str(out)]) == 0
    tab = browser.new_page(viewport={"width": 1400, "height": 900})
    tab.events = {"errors": [], "requests": []}
    tab.on("console", lambda m: m.type == "error" and tab.events["errors"].append(m.text))
    tab.on("pageerror", lambda e: tab.events["errors"].append(str(e)))
    tab.on("request", lambda r: tab.events["requests"].append(r.url))
    tab.goto((out / "report.html").as_uri(), wait_until="load")
    yield tab
    tab.close()


def _screenshot(page, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if os.environ.get("ASCENDBENCH_TEST_ARTIFACTS"):
        keep = Path(os.environ["ASCENDBENCH_TEST_ARTIFACTS"])
        keep.mkdir(parents=True, exist_ok=True)
        path = Path(shutil.copy(path, keep / path.name))
    print(f"screenshot: {path}")
    return path


def test_the_page_loads_offline_with_every_picture_drawn(page, tmp_path):
    images = page.evaluate("() => [...document.images].map(i => [i.complete, i.naturalWidth, "
                           "i.src.slice(0, 15)])")
    assert len(images) == 4 + 2, "four npu heatmaps and two plots (latency, error) of the one model"
    assert all(done and width > 0 and src.startswith("data:image/png")
               for done, width, src in images)
    assert page.events["errors"] == []
    assert [u for u in page.events["requests"] if not u.startswith(LOCAL)] == []
    assert _screenshot(page, tmp_path, "report_html_records").stat().st_size > 0


def test_clicking_a_header_sorts_its_table_by_number(page):
    header = page.locator("th", has_text=re.compile(r"^median ms$")).first
    table = page.locator("table", has=header).first
    before = [float(v) for v in table.evaluate(COLUMN, "median ms")]
    assert before != sorted(before), "rows start in sweep order"
    header.click()
    assert [float(v) for v in table.evaluate(COLUMN, "median ms")] == sorted(before)
    assert header.get_attribute("aria-sort") == "ascending"
    header.click()
    assert [float(v) for v in table.evaluate(COLUMN, "median ms")] == sorted(before, reverse=True)
    assert page.events["errors"] == []


@pytest.mark.slow
def test_the_page_of_a_real_tiny_sweep_loads_and_says_what_report_md_says(browser, tmp_path):
    """A real 2 dtype x 2 preset sweep of the tiny twin (CLI subprocess, 32x32 px): its report.html
    in Chromium."""
    sweep = tmp_path / "sweep"
    result = run_cli(["-m", "model=tiny_flux2_decoder", "device=cpu", "dtype=float32,bfloat16",
                      "preset=mini,balanced", "preset.height=32", "preset.width=32",
                      "preset.warmup=0",
                      "preset.iters=3", "fail_on=null"], cwd=tmp_path, out_dir=sweep, timeout=300)
    assert result.returncode == 0, result.output[-3000:]
    out = tmp_path / "reports"
    assert main([str(sweep), "--out", str(out)]) == 0
    assert len(list(sweep.rglob("record.json"))) == 4
    markdown = (out / "report.md").read_text()
    assert "4 record(s): 4 ok" in markdown and "bfloat16" in markdown and "balanced" in markdown
    assert html_tables((out / "report.html").read_text()) == markdown_tables(markdown)

    tab = browser.new_page(viewport={"width": 1400, "height": 900})
    errors, requests = [], []
    tab.on("console", lambda m: m.type == "error" and errors.append(m.text))
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.on("request", lambda r: requests.append(r.url))
    tab.goto((out / "report.html").as_uri(), wait_until="load")
    images = tab.evaluate("() => [...document.images].map(i => [i.complete, i.naturalWidth, "
                          "i.src.slice(0, 15)])")
    assert len(images) >= 2 + 4, "the latency and error plots and one side-by-side picture per job"
    assert all(done and width > 0 and src.startswith("data:image/png")
               for done, width, src in images)
    assert errors == [] and [u for u in requests if not u.startswith(LOCAL)] == []
    assert _screenshot(tab, tmp_path, "report_html_real_sweep").stat().st_size > 0
    tab.close()


def test_the_port_report_of_each_seed_model_renders_offline(browser, write_record,
                                                            write_t2v_record, tmp_path):
    """The README-shaped port documents (an image decoder and a T2V model) in Chromium: every
    section's table drawn, nothing fetched, no script error; a screenshot of each is kept."""
    for dtype, err in (("float32", 0.0024), ("float16", 0.0078), ("bfloat16", 0.0733)):
        write_record(f"flux_{dtype}", dtype=dtype, mean_rel_err=err)
    write_t2v_record("t2v_mini", calls=2)
    out = tmp_path / "reports"
    assert main([str(tmp_path / "records"), "--out", str(out), "--no-plots", "--port", "--lang",
                 "zh"]) == 0
    for model in ("flux2_small_decoder", "tiny_ltx2_t2v"):
        tab = browser.new_page(viewport={"width": 1200, "height": 900})
        errors, requests = [], []
        tab.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
        tab.on("request", lambda r, requests=requests: requests.append(r.url))
        tab.goto((out / "port" / f"{model}.html").as_uri(), wait_until="load")
        headings = tab.evaluate("() => [...document.querySelectorAll('h2')]"
                                ".map(h => h.textContent)")
        wanted = ("模型概述", "适配环境", "复现方法", "精度评测", "性能测试", "已知问题", "限制")
        assert [h for h in wanted if not any(h in x for x in headings)] == []
        assert tab.evaluate("() => document.querySelectorAll('table').length") >= 4
        assert errors == [] and [u for u in requests if not u.startswith(LOCAL)] == []
        assert _screenshot(tab, tmp_path, f"port_report_{model}").stat().st_size > 0
        tab.close()
