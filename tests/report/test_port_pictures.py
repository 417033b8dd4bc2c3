"""Pictures in the port report: the worst judged workload's side-by-side pictures shown (Markdown
and HTML), the jobs' other pictures linked, nothing outside a record's job directory."""

from __future__ import annotations

import json
import re

import pytest
from PIL import Image

from ascendbench.report.__main__ import main

EVIL = "x](javascript:alert(1)) <img src=x onerror=alert(1)>_compare_png"


@pytest.fixture
def pictured(write_record, tmp_path):
    """A passing and a failing judged image workload, each with side-by-side pictures and images;
    the failing one also lists files outside its job directory and an alt text meant to inject."""
    (tmp_path / "records").mkdir()
    Image.new("RGB", (8, 8), (0, 0, 255)).save(tmp_path / "records" / "outside.png")
    for name, err in (("pass", 0.002), ("fail", 0.07)):
        path = write_record(name, mean_rel_err=err, preset=name)
        record = json.loads(path.read_text())
        record["artifacts"] = {
            "image_compare_png": ["visual/image_compare_0.png", "visual/image_compare_1.png"],
            "image_device_png": ["images/image_device_0.png"],
            "image_reference_png": ["images/image_reference_0.png"]}
        if name == "fail":
            record["artifacts"]["escape_compare_png"] = ["../outside.png", str(tmp_path / "records"
                                                                              / "outside.png"),
                                                         "visual/linked.png"]
            record["artifacts"][EVIL] = "visual/evil.png"
        path.write_text(json.dumps(record))
        for rel in [*record["artifacts"]["image_compare_png"], "images/image_device_0.png",
                    "images/image_reference_0.png", "visual/evil.png"]:
            (path.parent / rel).parent.mkdir(exist_ok=True)
            Image.new("RGB", (8, 8), (200, 40, 40)).save(path.parent / rel)
        (path.parent / "visual" / "linked.png").symlink_to(tmp_path / "records" / "outside.png")
    return tmp_path


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_worst_judged_workloads_pictures_are_shown_and_the_rest_linked(pictured, lang):
    out = pictured / "reports"
    assert main([str(pictured / "records"), "--out", str(out), "--no-plots", "--port", "--lang",
                 lang]) == 0
    text = (out / "port" / "flux2_small_decoder.md").read_text()
    title = "Pictures" if lang == "en" else "输出图像"
    body = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    shown = re.findall(r"!\[([^\n]*?)\]\(([^)]+)\)", body)
    assert [target for _, target in shown] == ["../../records/fail/visual/image_compare_0.png",
                                               "../../records/fail/visual/evil.png"], "the FAIL's"
    assert "image_compare_png npu float16 fail 512x512" in [alt for alt, _ in shown]
    linked = [line for line in body.splitlines() if line.startswith("- ")]
    assert any("records/pass/visual/image_compare_0.png" in line for line in linked)
    assert any("records/fail/visual/image_compare_1.png" in line for line in linked)
    assert "outside.png" not in text and "linked.png" not in text
    page = (out / "port" / "flux2_small_decoder.html").read_text()
    assert page.count("data:image/png;base64,") == 2, "the shown pictures are embedded"
    assert "<img src=x" not in page and "href=\"javascript" not in page
