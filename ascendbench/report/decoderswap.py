"""The FLUX.2 decoder swap (``+sweep=flux2_decoder_swap``): small vs standard, the claims."""

from __future__ import annotations

import json
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
HEADERS = ("workload", "claim (seed)", "measured", "holds")


def decoder(row: fmt.Row) -> str | None:
    """``model.vae`` of the row's job (``small``/``standard``), None for any other job."""
    try:
        vae = (json.loads(row.get(CONFIG_COLUMN) or "{}").get("model") or {}).get("vae")
    except (ValueError, AttributeError):
        return None
    return vae if vae in SIDES else None


def _decode(row: fmt.Row, record: Mapping[str, Any]) -> tuple[Any, str]:
    """The decode's latency (whole job: a decoder; ``vae_decode`` phase: a pipeline)."""
    phase = record.get("bench", {}).get("phases", {}).get("vae_decode")
    if isinstance(phase, Mapping) and phase.get("median_ms"):
        return section_latency(None, float(phase["median_ms"])), "vae_decode phase median"
    return latency_of(row), "job median"


def _image(row: fmt.Row, record: Mapping[str, Any]) -> Any:
    rel = record.get("artifacts", {}).get("device_outputs")
    path = fmt.inside(Path(row["record"]).parent, rel) if isinstance(rel, str) else None
    tensors = load_file(str(path)) if path and path.is_file() else {}
    return tensors.get(fmt.primary_output(row) or "", next(iter(tensors.values()), None))


def _quality(small: fmt.Row, standard: fmt.Row, records: list[dict]) -> tuple[str, str]:
    images = [_image(row, rec) for row, rec in zip((standard, small), records[::-1], strict=True)]
    if any(image is None or image.dim() != 4 for image in images):
        return "missing", "untested: the device outputs were not saved (artifacts.tensors)"
    options = PerImageMetrics()
    values, _ = options.compute(*images, options.skips(*images[0].shape[-2:]), 8)
    means = {name: sum(v) / len(v) for name, v in values.items() if v}
    holds = all(means.get(name, 0.0) >= low for name, low in NEARLY_LOSSLESS.items())
    measured = ", ".join(f"{name} {fmt.num(value)}" for name, value in means.items())
    if any(fmt.get(row, "weights.kind") != "loaded" for row in (small, standard)):
        return measured, "untested: random-init weights (not the trained decoder pair)"
    return measured, "holds" if holds else "does not hold (PSNR >= 30 dB and SSIM >= 0.95)"


def swap_rows(small: fmt.Row, standard: fmt.Row, rule: LatencyRule) -> list[list[str]]:
    """The three claims of one small/standard pair: claim, measured value, whether it holds."""
    records = [json.loads(Path(row["record"]).read_text()) for row in (small, standard)]
    (new, how), (old, _) = _decode(small, records[0]), _decode(standard, records[1])
    if new is None or old is None:
        speed = ["missing", "untested: no decode time"]
    else:
        shift = Shift.apart((old.median_ms, old.interval), (new.median_ms, new.interval))
        tested = new.interval is not None and old.interval is not None
        answer = "holds" if shift.faster(rule.alpha, rule.min_effect) else "does not hold"
        speed = [f"{fmt.times(old.median_ms / new.median_ms)} faster ({how}; small/standard "
                 f"{shift.text(rule.alpha)})", answer if tested else "untested: no interval"]
    peaks = [fmt.get(r, "bench.memory.peak_allocated_mb") for r in (small, standard)]
    if all(isinstance(p, (int, float)) and p > 0 for p in peaks):
        ratio = peaks[1] / peaks[0]
        memory = [f"{fmt.times(ratio)} lower ({fmt.num(peaks[1])} -> {fmt.num(peaks[0])} MB peak)",
                  "holds" if ratio > 1 + rule.min_effect else "does not hold"]
    else:
        memory = ["missing", "untested: no peak memory"]
    return [["~1.4x faster decoding", *speed], ["~1.4x lower memory", *memory],
            ["nearly lossless image quality", *_quality(small, standard, records)]]


def swap_section(rows: fmt.Rows, base_dir: Path, rule: LatencyRule | None = None) -> str:
    """The swap table: every workload run with both decoders (the latest job of each)."""
    body = []
    for group in fmt.group([r for r in rows if decoder(r)],
                                lambda r: tuple(str(fmt.get(r, k)) for k in KEY)).values():
        pair = {side: latest([r for r in group if decoder(r) == side]) for side in SIDES}
        if None in pair.values():
            continue
        links = " ".join(fmt.record_link(pair[side], base_dir) + f" ({side})" for side in SIDES)
        label = " ".join(fmt.cells(pair["small"], ["job.model", "job.device", "job.dtype", "size"]))
        claims = swap_rows(pair["small"], pair["standard"], rule or LatencyRule())
        body += [[f"{label} {links}" if i == 0 else "", *cells] for i, cells in enumerate(claims)]
    if not body:
        return "No workload ran with both decoders (`+sweep=flux2_decoder_swap`)."
    return fmt.table(HEADERS, body, ["small: FLUX.2-small-decoder; standard: the FLUX.2 decoder"])
