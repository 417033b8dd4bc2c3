"""The FLUX.2 decoder swap (``+sweep=flux2_decoder_swap``): small vs standard, the claims."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any, Mapping

from safetensors.torch import load_file

from ascendbench.bench.stats import Shift
from ascendbench.metrics.image import PerImageMetrics
from ascendbench.report import fmt
from ascendbench.report.gather import CONFIG_COLUMN, KEY
from ascendbench.report.performance import latest
from ascendbench.report.significance import LatencyRule, latency_of, section_latency

SIDES = ("small", "standard")
NEARLY_LOSSLESS = {"psnr_db": 30.0, "ssim": 0.95}  # the image metric's rules (conf/metric)
HEADERS = ("s_workload", "s_claim", "s_measured", "s_verdict")


def decoder(row: fmt.Row) -> str | None:
    """``model.vae`` of the row's job (``small``/``standard``), None for any other job."""
    model = fmt.json_of(row.get(CONFIG_COLUMN), dict).get("model")
    return model["vae"] if isinstance(model, dict) and model.get("vae") in SIDES else None


def _decode(row: fmt.Row, record: Mapping[str, Any]) -> tuple[Any, str]:
    """The decode's latency (whole job: a decoder; ``vae_decode`` phase: a pipeline)."""
    phase = record.get("bench", {}).get("phases", {}).get("vae_decode")
    if isinstance(phase, Mapping) and phase.get("median_ms"):
        return section_latency(None, float(phase["median_ms"])), "s_phase"
    return latency_of(row), "s_job"


def _image(row: fmt.Row, record: Mapping[str, Any]) -> Any:
    rel = record.get("artifacts", {}).get("device_outputs")
    path = fmt.inside(Path(row["record"]).parent, rel) if isinstance(rel, str) else None
    tensors = load_file(str(path)) if path and path.is_file() else {}
    return tensors.get(fmt.primary_output(row) or "", next(iter(tensors.values()), None))


def _quality(small: fmt.Row, standard: fmt.Row, records: list[dict], lang: str) -> tuple[str, str]:
    images = [_image(row, rec) for row, rec in zip((standard, small), records[::-1], strict=True)]
    if any(image is None or image.dim() != 4 for image in images):
        return "missing", fmt.word("s_no_outputs", lang)
    options = PerImageMetrics()
    values, _ = options.compute(*images, options.skips(*images[0].shape[-2:]), 8)
    means = {name: sum(v) / len(v) for name, v in values.items() if v}
    holds = all(means.get(name, 0.0) >= low for name, low in NEARLY_LOSSLESS.items())
    measured = ", ".join(f"{name} {fmt.num(value)}" for name, value in means.items())
    if any(fmt.get(row, "weights.kind") != "loaded" for row in (small, standard)):
        return measured, fmt.word("s_random", lang)
    return measured, fmt.word("s_holds" if holds else "s_not_lossless", lang)


def swap_rows(small: fmt.Row, standard: fmt.Row, rule: LatencyRule, lang: str) -> list[list[str]]:
    """The three claims of one small/standard pair: claim, measured value, whether it holds."""
    say = partial(fmt.word, lang=lang)
    records = [json.loads(Path(row["record"]).read_text()) for row in (small, standard)]
    (new, how), (old, _) = _decode(small, records[0]), _decode(standard, records[1])
    if new is None or old is None:
        speed = ["missing", say("s_no_time")]
    else:
        shift = Shift.apart((old.median_ms, old.interval), (new.median_ms, new.interval))
        tested = new.interval is not None and old.interval is not None
        answer = say("s_holds" if shift.faster(rule.alpha, rule.min_effect) else "s_not_holds")
        speed = [say("s_speed", ratio=fmt.times(old.median_ms / new.median_ms), how=say(how),
                     shift=shift.text(rule.alpha)), answer if tested else say("s_no_interval")]
    peaks = [fmt.get(r, "bench.memory.peak_allocated_mb") for r in (small, standard)]
    if all(isinstance(p, (int, float)) and p > 0 for p in peaks):
        ratio = peaks[1] / peaks[0]
        memory = [say("s_peak", ratio=fmt.times(ratio), standard=fmt.num(peaks[1]),
                      small=fmt.num(peaks[0])),
                  say("s_holds" if ratio > 1 + rule.min_effect else "s_not_holds")]
    else:
        memory = ["missing", say("s_no_peak")]
    return [[say("s_faster"), *speed], [say("s_memory"), *memory],
            [say("s_lossless"), *_quality(small, standard, records, lang)]]


def swap_section(rows: fmt.Rows, base_dir: Path, rule: LatencyRule | None = None,
                 lang: str = "en") -> str:
    """The swap table (in ``lang``): every workload run with both decoders, the latest of each."""
    body = []
    for group in fmt.group([r for r in rows if decoder(r)],
                                lambda r: tuple(str(fmt.get(r, k)) for k in KEY)).values():
        pair = {side: latest([r for r in group if decoder(r) == side]) for side in SIDES}
        if None in pair.values():
            continue
        links = " ".join(fmt.record_link(pair[side], base_dir) + f" ({side})" for side in SIDES)
        label = " ".join(fmt.cells(pair["small"], ["job.model", "job.device", "job.dtype", "size"]))
        claims = swap_rows(pair["small"], pair["standard"], rule or LatencyRule(), lang)
        body += [[f"{label} {links}" if i == 0 else "", *cells] for i, cells in enumerate(claims)]
    if not body:
        return fmt.word("s_none", lang)
    return fmt.table([fmt.word(h, lang) for h in HEADERS], body, [fmt.word("s_note", lang)])
