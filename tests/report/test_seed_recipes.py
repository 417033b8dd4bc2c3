"""Each seed's README recipe ("Reproducing the seed reports") run as real Hydra jobs of the tiny
twins on the CPU, then the report as ``make report`` runs it (``python -m ascendbench.report
--port``, in English and in Chinese): the seed's tables have the seed's own header row
(../shared/seeds/), one row per workload, and each cell is the value of the record behind it.

The commands are the README's, word for word (a drift of the README breaks the test); only the
tiny-twin and size overrides are added: the twin and its saved directory for ``<dir>``,
``device=cpu`` for ``device=npu``, 16-32 px, 2 steps, ``bench.protocol=fixed preset.warmup=1
preset.iters=2`` and the reference in this process. Each recipe runs whole (every command, every
sweep value) but the FLUX.2 performance grid, cut to batch 1,2 x 16,32 px. About 50 s for the four
on two idle cores.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from ascendbench.report.fmt import WORDS, word

from helpers.recipes import (
    ROOT,
    bodies,
    linked,
    make_report,
    ok_records,
    readme_recipe,
    run_recipe,
    section,
    shows,
    tiny,
)
from helpers.seeds import SEEDS, names_verdict, seed_column, seed_header, seed_text, tables

STANDINS = ROOT / "tests" / "standins"
pytestmark = [pytest.mark.skipif(not SEEDS.is_dir(), reason=f"the seed reports are not at {SEEDS}"),
              pytest.mark.slow]  # 1-25 s each: scheduled first (tests/conftest.py)
# What every job of the tests adds: seconds, not hours.
QUICK = ["bench.protocol=fixed", "preset.warmup=1", "preset.iters=2", "bench.flops.enabled=false",
         "baseline.process=in-process"]


def _template_phrases() -> set[str]:
    """The literal text of every English template of the words file (split at its ``{fields}``,
    code and tags) but what the Chinese forms write too (the seeds' own English: Batch, PERF)."""
    chinese = re.sub(r"\{[^}]*\}", " ", "\n".join(zh for _, zh in WORDS.values()))
    pieces = {p.strip(" :;,.()[]=\"'") for en, _ in WORDS.values()
              for p in re.split(r"\{[^}]*\}|`[^`]*`|<[^>]*>", en)}
    return {p for p in pieces if re.search(r"[A-Za-z]{2}", p) and p not in chinese}


def _english_templates(text: str) -> list[str]:
    """The template phrases a reader reads in ``text`` (Markdown or HTML); log text (code), link
    targets, tags and the page's style and script are not read."""
    text = re.sub(r"<(script|style)>.*?</\1>", " ", text, flags=re.S)
    text = html.unescape(re.sub(r"<code>.*?</code>|`[^`\n]*`|\]\([^)]*\)|<[^>]+>", " ", text))
    return sorted(p for p in _template_phrases()
                  if re.search(rf"(?<![\w./-]){re.escape(p)}(?![\w/-]|\.\w)", text, re.ASCII))


def _no_english_template_in_chinese(texts: dict[str, str]) -> None:
    """The Chinese port report (Markdown, HTML) and report.md's seed layouts say no fixed phrase in
    English; the English ones do (the check sees the phrases where they are)."""
    for lang in ("en", "zh"):
        texts[f"layouts_{lang}"] = texts[lang].split("\n## ", 2)[1]  # "## Seed layouts" only
    for kind in ("port", "port_html", "layouts"):
        assert _english_templates(texts[f"{kind}_en"]), f"the check finds nothing in {kind}_en"
        assert _english_templates(texts[f"{kind}_zh"]) == [], f"English template in {kind}_zh"


# -- FLUX.2 (003) ----------------------------------------------------------------------------------

FLUX2 = ["python -m ascendbench -m +sweep=flux2_accuracy device=npu model.source=<dir> "
         "model.weights=required",
         "python -m ascendbench -m +sweep=flux2_perf device=npu model.source=<dir> "
         "model.weights=required",
         "python -m ascendbench -m +sweep=flux2_perf_cpu model.source=<dir>"]
FLUX2_METRICS = {"MAE": "mae", "MSE": "mse", "RMSE": "rmse", "Max Abs Error": "max_abs_err",
                 "Mean Rel Error": "mean_rel_err", "PSNR": "psnr_db", "Cosine Similarity": "cosine"}


def test_flux2_recipe_gives_the_seeds_accuracy_performance_and_dtype_tables(tiny_flux2_dir,
                                                                            tmp_path, monkeypatch):
    readme_recipe(FLUX2)
    places = {"<dir>": str(tiny_flux2_dir)}
    # The twin (random init by default: the real model's weights=auto loads what model.source
    # holds), the CPU, 32 px; the performance grid cut to batch 1,2 x 16,32 px (the seed: 1,2,4 x
    # 512,1024; batch 4 adds 9 s).
    twin = ["model=tiny_flux2_decoder", "device=cpu", "?model.weights=auto", *QUICK]
    run_recipe(tmp_path, "flux2_accuracy",
               tiny(FLUX2[0], places, [*twin, "preset.height=32", "preset.width=32"]))
    grid = ["preset.height=16,32", "preset.batch_size=1,2"]
    run_recipe(tmp_path, "flux2_perf", tiny(FLUX2[1], places, [*twin, *grid]))
    run_recipe(tmp_path, "flux2_perf_cpu", tiny(FLUX2[2], places, [*twin, *grid]))
    texts, reports = make_report(tmp_path, monkeypatch), tmp_path / "reports"
    zh = texts["zh"]
    _no_english_template_in_chinese(texts)

    # metrics x dtypes; the device that ran (CPU) where the seed ran the NPU
    [acc] = tables(zh, "精度评测")
    assert acc[0] == [c.replace("NPU", "CPU") for c in seed_header("003", "指标")]
    judged = linked(zh, "精度评测", reports)
    accuracy = ok_records(tmp_path, "multirun/flux2_accuracy")
    assert sorted(r["job"]["dtype"] for r in judged) == sorted(r["job"]["dtype"]
                                                               for r in accuracy), \
        "one column per accuracy workload, perf-only runs left out"
    labels, seed_labels = [r[0] for r in acc[1:]], seed_column("003", "指标")
    assert labels == [label for label in seed_labels if label in labels] and labels[-1] == "结果"
    for column, record in enumerate(judged, start=1):
        assert acc[0][column] == f"CPU {record['job']['dtype']} vs CPU"
        cells = {row[0]: row[column] for row in acc[1:]}
        for label, name in FLUX2_METRICS.items():
            if label in cells:
                assert shows(cells[label], record["metrics"][name]["value"],
                             percent=name == "mean_rel_err"), label
        assert {"Mean Rel Error", "RMSE",
                "PSNR"} <= set(cells) and names_verdict(cells["结果"], record)

    [perf] = tables(zh, "性能测试")
    assert perf[0] == seed_header("003", "Batch")
    rows = linked(zh, "性能测试", reports)
    workloads = {(r["job"]["batch_size"], r["job"]["height"], r["job"]["width"], r["job"]["dtype"])
                 for r in ok_records(tmp_path)}
    assert len(perf) - 1 == len(rows) == len(workloads), "one row per workload"
    for row, record in zip(perf[1:], rows, strict=True):
        job, bench = record["job"], record["bench"]
        assert row[:3] == [str(job["batch_size"]), f"{job['height']}x{job['width']}", job["dtype"]]
        assert (shows(row[3], bench["latency"]["mean_ms"])
                and shows(row[4], bench["latency"]["p90_ms"]))
        assert shows(row[5], bench["throughput"]["value"])
        assert shows(row[6],
                     bench["memory"].get("peak_allocated_mb") or bench["memory"]["peak_rss_mb"])

    [advice] = tables(zh, "数据类型选择")
    assert advice[0] == seed_header("003", "场景")
    assert {r[0] for r in advice[1:]} <= set(seed_column("003", "场景"))
    failing = sorted(r["job"]["dtype"] for r in accuracy if r["verdict"] == "FAIL")
    assert sorted(r[1].strip("`") for r in advice[1:] if r[0] == "不推荐") == failing
    for row in advice[1:]:
        [record] = [r for r in accuracy if r["job"]["dtype"] == row[1].strip("`")]
        err = re.search(r"[（(]([^）)]+)[）)]", row[2]).group(1)
        assert shows(err, record["metrics"]["mean_rel_err"]["value"], percent=True), row
    assert ": 加速比\n" not in zh, \
        "the speed-up needs an accelerator run; these records are all CPU"

    en = texts["en"]
    assert tables(en, "Accuracy (metrics x dtypes)")[0][0][0] == "Metric"
    assert tables(en, "Performance (batch x resolution)")[0][0] == perf[0]
    assert tables(en, "dtype recommendation")[0][0] == ["Scenario", "Recommended dtype", "Why"]
    for title_en, title_zh in (("Accuracy (metrics x dtypes)", "精度评测"),
                               ("Performance (batch x resolution)", "性能测试")):
        assert bodies(en, title_en) == bodies(zh, title_zh)


# -- LTX VAE layer (001) ---------------------------------------------------------------------------

LAYER = ("python -m ascendbench model=ltx_video_vae_conv_in model.source=<LTX-2 dir> "
         "model.weights=required \\\n"
         "    device=npu dtype=bfloat16 preset=mini bench.protocol=fixed preset.warmup=3 "
         "preset.iters=10 baseline.reference=float32")
LATENCY = {"平均": "mean_ms", "最小": "min_ms", "最大": "max_ms", "p50": "median_ms",
           "p90": "p90_ms", "p95": "p95_ms"}


@pytest.fixture
def tiny_ltx2_dir(tmp_path) -> Path:
    """An LTX-2-style directory whose vae/ holds the tiny video VAE in bfloat16 (decoder.conv_in:
    Conv3d 8 -> 32)."""
    import torch
    from diffusers import AutoencoderKLLTX2Video

    torch.manual_seed(0)
    vae = AutoencoderKLLTX2Video(latent_channels=8, block_out_channels=(8, 16, 32, 64),
                                 decoder_block_out_channels=(8, 16, 32),
                                 layers_per_block=(1, 1, 1, 1, 1),
                                 decoder_layers_per_block=(1, 1, 1, 1))
    vae.to(torch.bfloat16).save_pretrained(tmp_path / "ltx2" / "vae")
    return tmp_path / "ltx2"


def test_the_layer_recipe_gives_the_seeds_consistency_and_performance_lines(tiny_ltx2_dir,
                                                                            tmp_path, monkeypatch):
    readme_recipe([LAYER.replace("\\\n", "")])
    twin = ["model=tiny_ltx_video_vae_conv_in", "model.loader.subfolder=vae", "device=cpu", *QUICK]
    run_recipe(tmp_path, "conv_in",
               tiny(LAYER.replace("\\\n", ""), {"<LTX-2 dir>": str(tiny_ltx2_dir)}, twin))
    texts, reports = make_report(tmp_path, monkeypatch), tmp_path / "reports"
    _no_english_template_in_chinese(texts)
    [record] = ok_records(tmp_path)
    seed = seed_text("001")
    cells = {}
    for lang, title in (("zh", "一致性与性能"), ("en", "Layer: consistency and performance")):
        [layer] = tables(texts[lang], title)
        assert len(layer[0]) == 2 and linked(texts[lang], title,
                                             reports) == [record], "one table per workload"
        cells[lang] = {row[0]: row[1] for row in layer[1:]}
    zh, bench = cells["zh"], record["bench"]
    assert list(cells["en"].values()) == list(zh.values()), "the same values in both languages"
    # The labels are the seed's words, but for the verdict and mean_rel_err (the job's primary
    # error; the seed printed max_abs and cosine only).
    assert all(part in seed for label in zh for part in label.split()
               if part not in ("判定", "mean_rel_err") and "RSS" not in label), zh
    latent = record["inputs"]["latent"]
    shape = re.sub(r"\\(.)", r"\1",
                   zh["input latent"])  # the seed's "input latent shape ... dtype ... mean ..."
    assert shape.startswith(f"shape {json.dumps(latent['shape'])} {latent['dtype']}"), shape
    for stat in ("mean", "std", "min", "max"):
        assert shows(re.search(rf"{stat} (\S+?)(,|$)", shape).group(1), latent[stat]), stat
    assert shows(zh["首轮编译"], bench["cold_ms"])
    for label, field in LATENCY.items():
        assert shows(zh[f"稳定推理 {label}"], bench["latency"][field]), label
    assert shows(zh["吞吐 p50"], bench["throughput"]["value"]) \
        and zh["吞吐 p50"].endswith(bench["throughput"]["unit"]), "the median's throughput, named"
    memory = bench["memory"]
    assert "已分配" not in zh and "已预留" not in zh, "a CPU job: no allocator words"
    assert shows(zh["主机 RSS 峰值（CPU 无显存分配器）"], memory["peak_rss_mb"])
    metrics = record["metrics"]
    assert shows(zh["第二轮 最大差异"], metrics["determinism/second_run_max_abs_diff"]["value"])
    assert (shows(zh["max_abs"], metrics["max_abs_err"]["value"])
            and shows(zh["cosine"], metrics["cosine"]["value"]))
    assert shows(zh["mean_rel_err"], metrics["mean_rel_err"]["value"], percent=True)
    assert names_verdict(zh["判定"], record)
    assert bench["warmup"]["calls"] == 1 and bench["latency"]["count"] == 2, \
        "bench.protocol=fixed: exactly as asked"
    port = next((tmp_path / "reports" / "port").glob("*.md")).read_text()
    assert re.search(r"\| 模型架构 \| Conv3d\(8, 32, kernel_size=", port), \
        "the layer that ran, not the loader that read it"


# -- Sulphur-2 (000) -------------------------------------------------------------------------------

SULPHUR_S = ('S="model=sulphur2_base model.source=<Sulphur-2 dir> model.weights=required '
             'model.loader.config=<LTX-2 dir> model.loader.text_encoder.source=<LTX-2 dir> '
             'model.loader.offline=true"')
SULPHUR = ["python -m ascendbench $S device=npu dtype=bfloat16 preset=mini baseline.enabled=false",
           "python -m ascendbench -m $S device=npu dtype=bfloat16 preset=balanced,quality "
           "baseline.enabled=false "
           "model.task.cpu_offload=true",
           "python -m ascendbench -m $S device=npu dtype=bfloat16 preset=mini,balanced,quality "
           "baseline.reference=float32",
           "python -m ascendbench -m +sweep=attention_backends $S device=npu dtype=bfloat16 "
           "preset=mini "
           "baseline.reference=float32   # fused attention vs SDPA",
           "make report README=path/to/README.md     # fills <!-- ACCURACY_TABLE_BEGIN --> ... "
           "<!-- ACCURACY_TABLE_END -->"]


def _workload(record: dict) -> tuple:
    """What makes a row of the seed's tables: the preset and dtype (one size here), and the declared
    variants (the attention backend of the A/B sweep, CPU offload)."""
    model = record["config"]["model"]
    return (record["job"]["preset"], record["job"]["dtype"],
            json.dumps(model["patches"], sort_keys=True),
            model["task"].get("cpu_offload"))


def _variants(text: str, title: str, records: list[dict]) -> None:
    """Rows that read alike (the mini rows: fused attention and SDPA; the offload runs) ran the
    same on the CPU (the attention patch is skipped there, offload is off in force): the note says
    so by the settings' values in force, and no variants line sells them as differences."""
    lines = section(text, title).splitlines()
    assert not any(re.match(r"- (variants|变体): ", x) for x in lines), lines
    [line] = [x for x in lines
              if x.startswith(("- not applied / same setting", "- 未生效 / 设置相同"))]
    assert f"model.patches.0.backend={word('v_not_applied', 'zh')}" in line, line
    assert all(r["pipeline"]["patches_applied"] == [] for r in records)
    if any(r["config"]["model"]["task"].get("cpu_offload") for r in records):
        assert "model.task.cpu_offload=false" in line, line
        assert not any(r["pipeline"]["cpu_offload"] for r in records)


def _latest(records: list[dict], record: dict) -> bool:
    """``record`` is the last one written of its workload."""
    same = [r for r in records if _workload(r) == _workload(record)]
    return record["timing"]["finished_at"] == max(r["timing"]["finished_at"] for r in same)


@pytest.fixture
def tiny_ltx2_pipeline_dir(tmp_path) -> Path:
    """The tiny LTX-2 pipeline (the Sulphur-2 twin) saved as a diffusers directory: weights,
    configs, the text encoder and tokenizer in one place (the twin has no original-layout single
    file)."""
    from hydra.utils import instantiate

    from helpers import compose_config

    pipe = instantiate(compose_config(["model=tiny_ltx2_t2v"]).model.loader).load(None, "random",
                                                                                  42).module
    pipe.save_pretrained(tmp_path / "sulphur2")
    return tmp_path / "sulphur2"


def _expanded(command: str) -> str:
    return command.replace("$S", SULPHUR_S.split("=", 1)[1].strip('"'))


def test_the_sulphur2_recipe_gives_the_seeds_per_resolution_and_perf_reference_tables(
        tiny_ltx2_pipeline_dir, tmp_path, monkeypatch):
    readme_recipe([SULPHUR_S, *SULPHUR])
    places = {"<Sulphur-2 dir>": str(tiny_ltx2_pipeline_dir),
              "<LTX-2 dir>": str(tiny_ltx2_pipeline_dir)}
    # 32x32, 9 frames, 2 steps for every preset (so the presets differ in name only).
    twin = ["model=tiny_ltx2_t2v", "device=cpu", "preset.height=32", "preset.width=32",
            "preset.num_frames=9",
            "preset.steps=2", *QUICK]
    for name, command in zip(("smoke", "offload", "accuracy", "attention"), SULPHUR, strict=False):
        run_recipe(tmp_path, name, tiny(_expanded(command), places, twin))
    # The seed's accuracy table as its author left it ("to be filled" rows), between the markers its
    # README has.
    placeholders = ["| " + " | ".join(cells) + " |" for cells in [seed_header("000", "分辨率")] + [
        line.split("\t") for line in seed_text("000").splitlines() if "\t待实测填充" in line]]
    readme = tmp_path / "README.md"
    readme.write_text("### 6.2 精度对比结果\n\n<!-- ACCURACY_TABLE_BEGIN -->\n"
                      + "\n".join(placeholders) + "\n<!-- ACCURACY_TABLE_END -->\n")
    assert len(placeholders) == 4
    texts, reports = make_report(tmp_path, monkeypatch, readme), tmp_path / "reports"
    _no_english_template_in_chinese(texts)
    zh, everything = texts["zh"], ok_records(tmp_path)
    accuracy = [r for r in everything if r["config"]["baseline"]["enabled"]]

    [acc] = tables(zh, "精度对比结果")
    assert acc[0] == seed_header("000", "分辨率")
    judged = linked(zh, "精度对比结果", reports)
    assert len(judged) == len({_workload(r) for r in judged}) == len({_workload(r)
                                                                      for r in accuracy}) == 4, \
        "one row per accuracy workload (3 presets, the SDPA variant); perf-only runs are none"
    assert all(_latest(accuracy, r) for r in judged), "each row the latest record of its workload"
    _variants(zh, "精度对比结果", judged)
    for number, (row, record) in enumerate(zip(acc[1:], judged, strict=True), 1):
        job, preset, metrics = record["job"], record["config"]["preset"], record["metrics"]
        assert (row[:3]
                == [f"{job['height']}x{job['width']}", str(preset["num_frames"]),
                    str(preset["steps"])])
        hidden = {check: [e["value"] for k, e in metrics.items() if k.startswith("layer/")
                          and k.endswith("/" + check)]
                  for check in ("max_abs_err", "cosine")}
        assert hidden["max_abs_err"] and hidden["cosine"], \
            "hidden states of the first and last blocks compared"
        assert shows(row[3], max(hidden["max_abs_err"])), "the worst"
        assert shows(row[4], min(hidden["cosine"])), "the worst"
        assert shows(row[5], metrics["video/video_psnr_db_mean"]["value"])
        assert shows(row[6], metrics["video/video_ssim_mean"]["value"])
        seed = {e["verdict"] for k, e in metrics.items() if (k.startswith("layer/") and k.endswith(
            ("/max_abs_err", "/cosine")) or k.endswith(("psnr_db_mean", "ssim_mean")))
            and e.get("verdict") in ("PASS", "WARN", "FAIL")}
        expected = next(v for v in ("FAIL", "WARN", "PASS") if v in seed)
        assert row[7].split(" ", 1)[0] == expected, "judged by the seed's 6.1 rules alone"
        if record["verdict"] != expected:  # ascendbench's own rules: named apart, never hidden
            own = next(x for x in section(zh, "精度对比结果").splitlines() if "自有规则" in x)
            named = own.split(f"[{number}] ", 1)[1].split("; [")[0]
            assert names_verdict(named, record), own

    filled = readme.read_text()
    assert "待实测填充" not in filled and "⏳" not in filled, \
        "no placeholder left between the markers"
    assert [[c.strip() for c in line.strip("|").split(" | ")] for line in filled.splitlines()
            if line.startswith("|")
            and not line.startswith("|---")] == acc, "the back-fill is the table above"

    [perf] = tables(zh, "性能参考")
    assert perf[0] == seed_header("000", "指标")
    timed = linked(zh, "性能参考", reports)
    workloads = len({_workload(r) for r in everything})
    assert len(timed) == len({_workload(r) for r in timed}) == workloads == 6, \
        "one entry per workload (the smoke and accuracy mini runs are one; offload, SDPA variants)"
    assert all(_latest(everything, r) for r in timed), \
        "each entry the latest record of its workload"
    _variants(zh, "性能参考", timed)
    cells = {row[0]: row[1:] for row in perf[1:]}
    seed_rows = seed_column("000", "指标")
    sizes = {f"{job['height']}x{job['width']}x{job['num_frames']} 生成时间"
             for job in (r["job"] for r in timed)}
    rss = "主机 RSS 峰值（CPU 无显存分配器）"  # a CPU job: the host's RSS
    assert set(cells) - set(seed_rows) == sizes - set(seed_rows) | {rss}
    assert shows(cells["模型加载时间"][0], max(r["weights"]["load_seconds"] for r in timed))
    firsts = [row[1] for row in perf[1:] if row[0] == "首帧编译时间"]
    gens = [row[1] for row in perf[1:] if row[0].endswith(" 生成时间")]
    for first, gen, record in zip(firsts, gens, timed, strict=True):
        assert shows(first, record["bench"]["cold_ms"])
        assert shows(gen, record["bench"]["latency"]["median_ms"])
    assert "峰值显存占用" not in cells and "已分配" not in zh and "已预留" not in zh
    assert shows(cells[rss][0], max(r["bench"]["memory"]["peak_rss_mb"] for r in timed))

    en = texts["en"]
    assert len(tables(en, "Accuracy per resolution")[0][0]) == 8
    assert bodies(en, "Accuracy per resolution") == bodies(zh, "精度对比结果")


# -- VideoFlexTok (004) ----------------------------------------------------------------------------

VIDEOFLEXTOK = ("python -m ascendbench -m model=videoflextok_d18_d28 model.source=<dir> "
                "model.weights=required \\\n"
                "    device=npu dtype=float32 preset=mini,balanced,quality bench.protocol=fixed "
                "preset.warmup=5 preset.iters=20 baseline.enabled=false")
GATES = {"[Gate1] strict load: missing": "gate/load_missing_keys",
         "[Gate2] config: not OK": "gate/config_mismatches",
         "reconstruction: PSNR (dB)": "gate/recon_psnr_db",
         "RANDOM-INIT: PSNR (dB)": "gate/control_psnr_db",
         "PSNR gap (dB)": "gate/control_psnr_gap_db",
         "[Gate3-b] stability: agreement": "gate/rerun_token_agreement",
         "[Gate3-b] pretrained PSNR reproducible (dB)": "gate/recon_psnr_rerun_diff_db",
         "token dist: unique ids / total": "gate/token_unique_ratio"}


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_the_videoflextok_recipe_gives_the_seeds_gates_with_their_values(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(STANDINS))
    from videoflextok_standin import build_pretrained  # the tests' stand-in of videoflextok

    build_pretrained().save_pretrained(tmp_path / "standin")
    command = VIDEOFLEXTOK.replace("\\\n", "")
    readme_recipe([command])
    # The twin on the stand-in (32x32, 9-frame chunks, 2 flow steps; its presets: 9, 18, 36 frames).
    twin = ["model=tiny_videoflextok", "device=cpu", *QUICK]
    run_recipe(tmp_path, "videoflextok", tiny(command, {"<dir>": str(tmp_path / "standin")}, twin),
               env={"PYTHONPATH": str(STANDINS)})
    texts, reports = make_report(tmp_path, monkeypatch), tmp_path / "reports"
    _no_english_template_in_chinese(texts)
    seed = seed_text("004").lower()
    bodies_by_lang = {}
    for lang, title in (("zh", "精度评测（Gate）"), ("en", "Gates")):
        [gate] = tables(texts[lang], title)
        jobs = linked(texts[lang], title, reports)
        assert len(jobs) == len(gate[0]) - 2 == len(ok_records(tmp_path)), "one column per workload"
        bodies_by_lang[lang] = [row[1:] for row in gate[1:]]
        for column, record in enumerate(jobs, start=2):
            job = record["job"]
            kind = word(f"v_{record['weights']['kind']}", lang)  # loaded, 已加载
            which = (f"{job['device']} {job['dtype']} {kind} "
                     f"{job['preset']} @ {job['height']}x{job['width']}x"
                     f"{record['config']['preset']['num_frames']}")
            assert gate[0][column] == which
            cells = {row[0]: row[column] for row in gate[1:]}
            for label in list(cells)[:-1]:  # the seed's words (the last row: the job's verdict)
                assert all(w in seed for w in re.findall(r"[a-z0-9-]+", label.lower())), label
            assert set(GATES) <= set(cells), cells
            for label, name in GATES.items():  # ``576/576 (1) PASS``, ``+9.68 dB PASS``
                entry, cell = record["metrics"][name], cells[label]
                found = re.search(r"\(([-0-9.e]+)\)", cell)
                assert shows(found.group(1) if found else cell.lstrip("+"), entry["value"]), label
                assert cell.endswith(f" {entry['verdict']}") if entry["verdict"] else True, label
            assert names_verdict(cells[gate[-1][0]], record)
            bench = record["bench"]
            perf = re.search(rf"- PERF {re.escape(which)}: avg=(\S+)ms min=(\S+) max=(\S+) "
                             r"p50=(\S+) p90=(\S+) p95=(\S+) throughput=(\S+) ",
                             section(texts[lang], title)).groups()
            for cell, field in zip(perf[:6], ("mean_ms", "min_ms", "max_ms", "median_ms", "p90_ms",
                                              "p95_ms"), strict=True):
                assert shows(cell, bench["latency"][field]), field
            assert shows(perf[6], bench["throughput"]["value"])
    assert bodies_by_lang["en"] == bodies_by_lang["zh"]
