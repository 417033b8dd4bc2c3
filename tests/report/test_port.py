"""The port report: one README-shaped document per model, every section filled from records."""

from __future__ import annotations

import re

import pytest
import yaml

from ascendbench.report.__main__ import main
from ascendbench.report.fmt import named_verdict
from ascendbench.report.tables import verdict_cell

SECTIONS = {"en": ("Overview", "Environment", "How to reproduce", "Smoke run", "Accuracy",
                   "Pictures", "Performance", "Known issues", "Limitations"),
            "zh": ("模型概述", "适配环境", "复现方法", "Smoke 验证", "精度评测", "输出图像",
                   "性能测试", "已知问题", "限制")}
PLACEHOLDERS = ("待实测填充", "TODO", "TBD", "placeholder", "to be filled", "⏳")


@pytest.fixture
def flux_records(write_record, tmp_path):
    """An accuracy sweep of three dtypes, a perf-only run and a failed job, with their Hydra
    overrides."""
    paths = {dtype: write_record(f"acc_{dtype}", dtype=dtype, mean_rel_err=err)
             for dtype, err in (("float32", 0.0024), ("float16", 0.0078), ("bfloat16", 0.0733))}
    paths["perf"] = write_record("perf_b2", dtype="float16", batch=2, baseline="skipped")
    paths["failed"] = write_record("failed", dtype="float16", status="failed")
    for name, path in paths.items():
        (path.parent / ".hydra").mkdir()
        dtype = name if name in ("float32", "float16", "bfloat16") else "float16"
        (path.parent / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(
            ["model=flux2_small_decoder", "device=npu", f"dtype={dtype}"]))
    return paths


def sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return {title.strip(): body.strip()
            for title, body in zip(parts[1::2], parts[2::2], strict=True)}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_section_is_there_filled_from_records_without_placeholders(flux_records, tmp_path,
                                                                         lang):
    out = tmp_path / "reports"
    assert main([str(tmp_path / "records"), "--out", str(out), "--no-plots", "--port", "--lang",
                 lang]) == 0
    text = (out / "port" / "flux2_small_decoder.md").read_text()
    found = sections(text)
    assert list(found) == list(SECTIONS[lang])
    assert all(body for body in found.values()), [k for k, v in found.items() if not v]
    assert not any(p in text for p in PLACEHOLDERS)
    reproduce = found[SECTIONS[lang][2]]
    for dtype in ("float32", "float16", "bfloat16"):
        command = f"python -m ascendbench model=flux2_small_decoder device=npu dtype={dtype}"
        assert command in reproduce
    assert "sha256:" + "ab" * 32 in found[SECTIONS[lang][0]], "the weights digest of the record"
    assert "7.33%" in found[SECTIONS[lang][4]] and "FAIL" in found[SECTIONS[lang][4]]
    issues = found[SECTIONS[lang][7]]
    assert "aclnn error 561000" in issues and "mean_rel_err" in issues and "image_lpips" in issues
    assert (out / "port" / "flux2_small_decoder.html").stat().st_size > 0


def _port(tmp_path, lang):
    out = tmp_path / f"reports_{lang}"
    assert main([str(tmp_path / "records"), "--out", str(out), "--no-plots", "--port", "--lang",
                 lang]) == 0
    return (out / "port" / "flux2_small_decoder.md").read_text()


def labels(text: str) -> list[str]:
    """Headings, table header cells and the label (first) cell of every table row."""
    found = [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            header = i + 1 < len(lines) and lines[i + 1].startswith("|---")
            found += cells if header else cells[:1]
    return found


def test_the_chinese_port_report_has_no_english_heading_or_label(flux_records, tmp_path):
    from ascendbench.report.fmt import WORDS

    seeds_own = {zh for _, zh in WORDS.values()}  # words the seeds write in English (Batch, Dtype)
    english = {en.split("{")[0].strip() for en, zh in WORDS.values() if en != zh
               and en.split("{")[0].strip() and en.split("{")[0].strip() not in zh} - seeds_own
    zh_labels, en_labels = labels(_port(tmp_path, "zh")), labels(_port(tmp_path, "en"))
    assert not [label for label in zh_labels if label in english], \
        "an English label in the Chinese report"
    assert [label for label in en_labels if label in english], \
        "the check sees the English labels where they are"
    zh_text = _port(tmp_path, "zh")
    assert "条成功记录" in zh_text.splitlines()[2] and "测试设备" in zh_text


def test_no_bare_missing_cell_a_value_a_record_lacks_says_so(flux_records, write_record, tmp_path):
    import json

    path = write_record("acc_old_env", dtype="float16", mean_rel_err=0.0078, height=1024,
                        width=1024)
    record = json.loads(path.read_text())
    del record["env"]["libraries"]["diffusers"]  # an older record that did not note diffusers
    path.write_text(json.dumps(record))
    for lang, absent in (("en", "not recorded (env.libraries.diffusers)"),
                         ("zh", "未记录（env.libraries.diffusers）")):
        text = _port(tmp_path, lang)
        cells = [c.strip() for line in text.splitlines() if line.startswith("|")
                 for c in line.strip("|").split("|")]
        assert "missing" not in cells, [line for line in text.splitlines() if "| missing" in line]
        assert absent in cells


def test_the_overview_shows_each_files_sha256sum_and_the_size_that_ran(flux_records, write_record,
                                                                       tmp_path):
    import json

    write_record("acc_1024", dtype="float16", mean_rel_err=0.0078, height=1024, width=1024)
    for path in (tmp_path / "records").glob("*/record.json"):  # as the loader records them
        record = json.loads(path.read_text())
        record["weights"].update(sha256sum=["d54e" + "0" * 60 + "  model.safetensors"],
                                 file_bytes=[10779872388], module="Conv3d(128, 1024)")
        record["pipeline"] = {"patches_applied": ["flex_attention_dense"]}
        path.write_text(json.dumps(record))
    overview = sections(_port(tmp_path, "en"))["Overview"]
    assert "| architecture | Conv3d(128, 1024) |" in overview, "the module that ran, not its loader"
    assert "| patches applied | flex_attention_dense |" in overview
    assert "| sha256sum | d54e" + "0" * 60 + "  model.safetensors (10779872388 bytes) |" in overview
    assert "| weights.digest (names and bytes of the files) | sha256:" in overview, \
        "the digest says what it covers"
    issues = sections(_port(tmp_path, "en"))["Known issues"]
    assert "npu bfloat16 mini @ 512x512: FAIL (mean_rel_err 7.33% > 1%)" in issues, \
        "the workload, not the preset; the rule that failed with its value"
    accuracy = (tmp_path / "reports_en" / "report.md").read_text()
    assert "| mini @ 1024x1024 |" in accuracy and "| mini @ 512x512 |" in accuracy, \
        "the size that ran"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_fail_cell_names_the_rule_that_failed_with_its_value(flux_records, tmp_path, lang):
    """The verdict contract: the seed layout's result row and the accuracy table's verdict column
    say which rule failed and by how much, not a bare FAIL (planted: bfloat16's 7.33% > 1%)."""
    accuracy = sections(_port(tmp_path, lang))[SECTIONS[lang][4]]
    [result] = [line for line in accuracy.splitlines() if line.startswith(("| Result", "| 结果"))]
    assert result.split(" | ")[1:] == ["PASS", "PASS", "FAIL (mean_rel_err 7.33% > 1%) |"]
    table = (tmp_path / f"reports_{lang}" / "report.md").read_text().split("## Accuracy", 1)[1]
    assert table.count("| FAIL (mean_rel_err 7.33% > 1%) |") == 1
    assert table.count("| PASS |") == 2


def test_a_verdict_names_at_most_three_rules_hidden_states_by_their_worst():
    def failing(value, rule):
        return {"value": value, "verdict": "FAIL", "rule": rule}

    row = {"verdict": "FAIL", "weights.kind": "random-init",
           **{f"metrics.{name}.{k}": v for name, entry in {
               "video/mean_rel_err": failing(0.0724, "<= 0.01"),
               "cosine": failing(0.99, ">= 0.999"),
               "gate/token_shape_match": failing(0, "== 1"), "psnr_db": failing(12.0, ">= 30"),
               "mae": {"value": 0.1, "verdict": "PASS", "rule": "<= 1"}}.items()
              for k, v in entry.items()},
           **{f"hidden.max_abs_err.{k}": v for k, v in failing(0.002, "<= 0.001").items()}}
    assert named_verdict(row) == ("FAIL (video/mean_rel_err 7.24% > 1%, cosine 0.99 < 0.999, "
                                  "gate/token_shape_match 0 (rule == 1), +2 …)")
    assert named_verdict(row, most=9).endswith("psnr_db 12 < 30, hidden.max_abs_err 0.002 > 0.001)")
    assert verdict_cell(row).endswith(" †") and named_verdict({"verdict": "PASS"}) == "PASS"


def test_a_known_issue_repeated_by_several_runs_is_said_once_with_its_count(write_record,
                                                                            tmp_path):
    for run in range(3):  # three runs of one failing workload
        write_record(f"bf16_{run}", dtype="bfloat16", mean_rel_err=0.07)
    issues = sections(_port(tmp_path, "en"))["Known issues"]
    line = "npu bfloat16 mini @ 512x512: FAIL (mean_rel_err 7% > 1%) (x3)"
    assert line in issues and issues.count("npu bfloat16 mini @ 512x512: FAIL") == 1, issues


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_record_text_no_template_wrote_is_quoted_as_log_text(flux_records, tmp_path, lang):
    import json

    record = json.loads(flux_records["float16"].read_text())
    record["warnings"] = ["see [docs](x) *now* <b> \\ here", "the `cpu` device is slow"]
    flux_records["float16"].write_text(json.dumps(record))
    issues = sections(_port(tmp_path, lang))[SECTIONS[lang][7]]
    for said in ("`RuntimeError: device run failed: aclnn error 561000`",
                 "`LPIPS backbone weights not available offline`",
                 "`see [docs](x) *now* <b> \\ here`"):  # as recorded, in code: nothing to escape
        assert said in issues, issues
    assert "the \\`cpu\\` device is slow" in issues, "a backtick cannot open code: escaped text"


def test_the_jobs_of_a_sweep_are_its_one_command_read_from_multirun_yaml(flux_records, tmp_path):
    sweep = flux_records["float32"].parent.parent
    task = ["+sweep=flux2_accuracy", "device=npu", "dtype=float32,float16,bfloat16"]
    elsewhere = tmp_path / "elsewhere.yaml"
    elsewhere.write_text(yaml.safe_dump({"hydra": {"overrides": {"task": ["planted=1"]}}}))
    (sweep / "multirun.yaml").symlink_to(elsewhere)  # a link is not the sweep's own file
    linked = sections(_port(tmp_path, "en"))["How to reproduce"]
    assert "planted=1" not in linked and "dtype=float32" in linked
    (sweep / "multirun.yaml").unlink()
    (sweep / "multirun.yaml").write_text(yaml.safe_dump(
        {"hydra": {"overrides": {"hydra": ["hydra.mode=MULTIRUN"], "task": task}}}))
    reproduce = sections(_port(tmp_path, "en"))["How to reproduce"].splitlines()
    assert reproduce[0] == f"- `python -m ascendbench -m {' '.join(task)}`"
    assert len(reproduce) == 2 and "ascendbench.report --port" in reproduce[1]  # no job lines
