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
    "input": ("input latent", "input latent"), "first_run": ("first call (compile)", "首轮编译"),
    "steady": ("steady", "稳定推理"), "avg": ("mean", "平均"), "min": ("min", "最小"), "max": ("max", "最大"),
    "thr": ("throughput", "吞吐"), "allocated": ("memory allocated", "已分配"),
    "reserved": ("memory reserved", "已预留"),
    "second_run": ("second run max diff (determinism)", "第二轮 最大差异"),
    # VideoFlexTok seed (004: gate log lines)
    "gate": ("Gate", "Gate"),
    "records": ("records", "记录"), "rules": ("rules", "判定规则"), "random": ("random-init weights", "随机初始化权重"),
}


def word(key: str, lang: str, **fill: str) -> str:
    """The word ``key`` in ``lang`` (``en`` or ``zh``), its ``{placeholders}`` filled."""
    text = WORDS[key][LANGS.index(lang)] if lang in LANGS else WORDS[key][0]
    return text.format(**fill) if fill else text
