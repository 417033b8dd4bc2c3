"""The port report: one README-shaped document per model, every section filled from records."""

from __future__ import annotations

import re

import pytest
import yaml

from ascendbench.report.__main__ import main

SECTIONS = {"en": ("Overview", "Environment", "How to reproduce", "Smoke run", "Accuracy", "Performance",
                   "Known issues", "Limitations"),
            "zh": ("模型概述", "适配环境", "复现方法", "Smoke 验证", "精度评测", "性能测试", "注意事项", "限制")}
PLACEHOLDERS = ("待实测填充", "TODO", "TBD", "placeholder", "to be filled", "⏳")


@pytest.fixture
def flux_records(write_record, tmp_path):
    """An accuracy sweep of three dtypes, a perf-only run and a failed job, with their Hydra overrides."""
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
    return {title.strip(): body.strip() for title, body in zip(parts[1::2], parts[2::2], strict=True)}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_section_is_there_filled_from_records_without_placeholders(flux_records, tmp_path, lang):
    out = tmp_path / "reports"
    assert main([str(tmp_path / "records"), "--out", str(out), "--no-plots", "--port", "--lang", lang]) == 0
    text = (out / "port" / "flux2_small_decoder.md").read_text()
    found = sections(text)
    assert list(found) == list(SECTIONS[lang])
    assert all(body for body in found.values()), [k for k, v in found.items() if not v]
    assert not any(p in text for p in PLACEHOLDERS)
    reproduce = found[SECTIONS[lang][2]]
    for dtype in ("float32", "float16", "bfloat16"):
        assert f"python -m ascendbench model=flux2_small_decoder device=npu dtype={dtype}" in reproduce
    assert "sha256:" + "ab" * 32 in found[SECTIONS[lang][0]], "the weights digest of the record"
    assert "7.33%" in found[SECTIONS[lang][4]] and "FAIL" in found[SECTIONS[lang][4]]
    issues = found[SECTIONS[lang][6]]
    assert "aclnn error 561000" in issues and "mean_rel_err" in issues and "image_lpips" in issues
    assert (out / "port" / "flux2_small_decoder.html").stat().st_size > 0
