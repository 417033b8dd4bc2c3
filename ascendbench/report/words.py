"""The words of the seed layouts in English and in Chinese (``report.lang=en|zh``).

The Chinese words are the seeds' own header words (``/shared/seeds/*.txt``), so that a back-filled README
keeps the headers its author wrote; the tests check each layout's Chinese header row against the seed's.
"""

from __future__ import annotations

LANGS = ("en", "zh")

WORDS: dict[str, tuple[str, str]] = {
    # FLUX.2 seed: accuracy (metrics x dtypes), performance (batch x resolution), speed-up, dtype advice
    "metric": ("Metric", "指标"),
    "vs_cpu": ("{device} {dtype} vs CPU", "{device} {dtype} vs CPU"),
    "result": ("Result", "结果"),
    "batch": ("Batch", "Batch"), "resolution": ("Resolution", "Resolution"), "dtype": ("Dtype", "Dtype"),
    "mean_ms": ("Mean (ms)", "Mean (ms)"), "p90_ms": ("P90 (ms)", "P90 (ms)"),
    "throughput": ("Throughput (samples/s)", "Throughput (samples/s)"), "mem_mb": ("Mem (MB)", "Mem (MB)"),
    "device": ("Device", "设备"), "data_type": ("Dtype", "数据类型"),
    "time_at": ("{size} time", "{size} 推理时间"), "speedup": ("Speed-up", "加速比"),
    "scenario": ("Scenario", "场景"), "recommended": ("Recommended dtype", "推荐 dtype"), "why": ("Why", "原因"),
    "production": ("Production (passes, fastest)", "生产部署"), "precise": ("Highest accuracy", "高精度要求"),
    "avoid": ("Not recommended", "不推荐"),
    "passes_fastest": ("passes ({err}), fastest", "精度通过（{err}），性能最佳"),
    "most_accurate": ("most accurate ({err})", "精度最高（{err}）"),
    "fails": ("fails ({err})", "精度不达标（{err}）"),
    # Sulphur-2 seed: per-resolution accuracy, performance reference
    "res": ("Resolution", "分辨率"), "frames": ("Frames", "帧数"), "steps": ("Steps", "Steps"),
    "hidden_max": ("hidden MaxDiff", "中间张量 MaxDiff"), "hidden_cos": ("hidden CosSim", "中间张量 CosSim"),
    "psnr": ("PSNR", "视频 PSNR(mean)"), "ssim": ("SSIM", "视频 SSIM(mean)"), "verdict": ("verdict", "判定"),
    "measured": ("Measured", "预估/实测数值"), "note": ("Note", "说明"),
    "load_time": ("Model load time", "模型加载时间"), "first_call": ("First-call (compile) time", "首帧编译时间"),
    "gen_time": ("{size} generation time", "{size} 生成时间"), "peak_mem": ("Peak memory", "峰值显存占用"),
    # LTX VAE layer seed (001: prose and log lines, no table; the labels are its words)
    "item": ("Item", "项目"), "value": ("Value", "数值"),
    "input": ("input", "input"), "first_run": ("first call (compile)", "首轮编译"),
    "steady": ("steady", "稳定推理"), "avg": ("mean", "平均"), "min": ("min", "最小"), "max": ("max", "最大"),
    "thr": ("throughput", "吞吐"), "allocated": ("memory allocated", "已分配"),
    "reserved": ("memory reserved", "已预留"),
    "second_run": ("second run max diff (determinism)", "第二轮 最大差异"),
    # VideoFlexTok seed (004: gate log lines)
    "variants": ("variants", "变体"),
    "gate": ("Gate", "Gate"), "workload": ("workload (preset @ the size that ran)", "测试规格（预设 @ 实际尺寸）"),
    "records": ("records", "记录"), "rules": ("rules", "判定规则"), "random": ("random-init weights", "随机初始化权重"),
    # The port report (the seeds' README structure): headings, labels and the templates of its sentences
    "p_overview": ("Overview", "模型概述"), "p_environment": ("Environment", "适配环境"),
    "p_reproduce": ("How to reproduce", "复现方法"), "p_smoke": ("Smoke run", "Smoke 验证"),
    "p_accuracy": ("Accuracy", "精度评测"), "p_performance": ("Performance", "性能测试"),
    "p_issues": ("Known issues", "已知问题"), "p_limits": ("Limitations", "限制"),
    "p_head": ("{ok} ok record(s), {failed} failed; every fact below is read from a record.json or its job directory.",
               "{ok} 条成功记录，{failed} 条失败；以下每一项均读自 record.json 或其作业目录。"),
    "p_item": ("item", "项目"), "p_value": ("value", "说明"), "p_model": ("model", "模型"), "p_task": ("task", "任务"),
    "p_architecture": ("architecture", "模型架构"), "p_parameters": ("parameters", "参数量"),
    "p_weights": ("weights", "权重"), "p_digest": ("weights.digest (names and bytes of the files)",
                                                 "weights.digest（文件名与内容）"),
    "p_tensor_digest": ("weights.digest (the tensors read)", "weights.digest（读取的张量）"),
    "p_no_digest": ("none: random-init, seed {seed}", "无：随机初始化，seed {seed}"),
    "p_expected": ("expected digest", "预期摘要"), "p_bytes": ("bytes", "字节"),
    "p_host": ("host", "主机"), "p_chip": ("device", "设备"), "p_driver": ("driver", "NPU 驱动"),
    "p_not_recorded": ("not recorded ({field})", "未记录（{field}）"),
    "p_not_in_record": ("not in the record", "记录中无此值"),
    "p_no_commands": ("The records' job directories hold no `.hydra/overrides.yaml`, so the commands are not known; "
                      "the resolved config of each job is in its record.json.",
                      "记录的作业目录中没有 `.hydra/overrides.yaml`，命令未知；每个作业的完整配置见其 record.json。"),
    "p_report_cmd": ("Report", "报告"), "p_reread": ("The first record ({link}) cannot be read again.",
                                                   "第一条记录（{link}）无法再次读取。"),
    "p_perf_only": ("Every ok record is a performance-only run (baseline.enabled=false): nothing was judged.",
                    "所有成功记录均为纯性能运行（baseline.enabled=false）：没有精度判定。"),
    "p_no_latency": ("No ok record holds a latency.", "没有成功记录含有时延。"),
    "p_failed_job": ("failed job", "失败作业"), "p_fail_on": ("FAIL on {n} metric(s)", "{n} 项指标 FAIL"),
    "p_placement": ("{n} placement finding(s) (CPU fallback or mixed devices)", "{n} 处放置问题（CPU 回退或混合设备）"),
    "p_skipped": ("skipped", "跳过"), "p_warning": ("warning", "警告"),
    "p_no_issues": ("None in the records: no failed job, FAIL verdict, skipped metric, warning or placement finding.",
                    "记录中没有：无失败作业、FAIL 判定、跳过的指标、警告或放置问题。"),
    "p_measured_on": ("measured on: {devices}; dtypes: {dtypes}", "测试设备：{devices}；数据类型：{dtypes}"),
    "p_cpu_only": ("no accelerator run in these records: no speed-up over the CPU, no device memory",
                   "记录中没有加速卡运行：无相对 CPU 的加速比，无设备显存"),
    "p_dtypes_missing": ("dtypes not measured: {dtypes}", "未测试的数据类型：{dtypes}"),
    "p_random": ("{n} of {total} record(s) ran random-init weights: their numbers describe the architecture in that "
                 "dtype, not a released checkpoint",
                 "{total} 条记录中 {n} 条使用随机初始化权重：数值反映该架构在该数据类型下的表现，而非发布的权重"),
    "p_perf_records": ("{n} record(s) are performance-only (baseline.enabled=false): no accuracy",
                       "{n} 条记录为纯性能运行（baseline.enabled=false）：无精度结果"),
    "p_reference": ("reference precision: {dtypes}", "参考精度：{dtypes}"),
    "p_no_hidden": ("no hidden-state comparison (compare.layers off in every record)",
                    "无中间张量比较（所有记录均未开启 compare.layers）"),
}


def word(key: str, lang: str, **fill: str) -> str:
    """The word ``key`` in ``lang`` (``en`` or ``zh``), its ``{placeholders}`` filled."""
    text = WORDS[key][LANGS.index(lang)] if lang in LANGS else WORDS[key][0]
    return text.format(**fill) if fill else text
