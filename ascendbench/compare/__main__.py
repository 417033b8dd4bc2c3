"""``python -m ascendbench.compare REF CAND [--atol A] [--rtol R] [--metric M] [--dtype D] [--out DIR]``.

Exit status: 0 PASS/WARN, 1 FAIL, 2 unusable input (a one-paragraph reason on stderr).
See :mod:`ascendbench.compare.standalone`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from ascendbench.compare.files import UnusableInput
from ascendbench.compare.standalone import CompareRequest, run_compare
from ascendbench.digits import judged_rule, judged_value

METRICS = ("image", "video", "regression", "tokens")
ALWAYS_SHOWN = ("max_abs_err", "mean_rel_err", "cosine")  # the seeds' headline numbers, judged or not
DTYPES = ("float32", "float16", "bfloat16")


def parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m ascendbench.compare", description=(
        "Judge a candidate output against a reference output with ascendbench's metric suites and verdict "
        "rules. Formats: .safetensors, .npy, .pt/.pth (weights_only), PNG/JPEG images, mp4 videos, "
        "directories of frames. Exit 0 PASS/WARN, 1 FAIL, 2 unusable input."))
    p.add_argument("reference", type=Path, help="the reference output (e.g. the CPU or GPU run)")
    p.add_argument("candidate", type=Path, help="the candidate output (e.g. the NPU run)")
    p.add_argument("--atol", type=float, help="allclose absolute tolerance; with --rtol a judged rule (max 0 misses)")
    p.add_argument("--rtol", type=float, help="allclose relative tolerance")
    p.add_argument("--metric", choices=METRICS, help="the metric suite (default: tokens for integers, image for "
                   "[N, 1|3, H, W], else regression; a 5-D output is a video only with --metric video)")
    p.add_argument("--dtype", choices=DTYPES, help="whose verdict rules apply (default: the candidate's half dtype, "
                   "else job.dtype of the record.json beside it, else float32)")
    p.add_argument("--out", type=Path, default=Path("compare_out"), help="output directory (default compare_out)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="a config override, e.g. metric.thresholds.cosine={min:0.999} (repeatable)")
    p.add_argument("--pictures", action="store_true", help="also draw side-by-side PNGs with error heatmaps")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run one comparison and print its summary."""
    args = parser().parse_args(argv)
    request = CompareRequest(reference=args.reference, candidate=args.candidate, out=args.out, metric=args.metric,
                             dtype=args.dtype, atol=args.atol, rtol=args.rtol, overrides=list(args.overrides),
                             pictures=args.pictures)
    try:
        code, record = run_compare(request)
    except UnusableInput as exc:
        print(f"compare: unusable input: {exc}. Give two outputs of the same names and shapes in one of the "
              "formats of `python -m ascendbench.compare --help`.", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a config error (bad --set) is a usage error, not a traceback
        print(f"compare: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    shown = {k: v for k, v in record["metrics"].items() if isinstance(v, dict) and "value" in v
             and (v.get("verdict") or k.rsplit("/", 1)[-1] in ALWAYS_SHOWN)}
    for name, entry in shown.items():
        rule = f"  ({judged_rule(name, entry)})" if entry.get("verdict") else ""
        print(f"{name:28} {judged_value(name, entry):>14}  {entry.get('verdict') or '-'}{rule}")
    print(f"verdict {record['verdict']}  ({record['metric']} suite, {record['dtype_rules']} rules from "
          f"{record.get('dtype_from')}; "
          f"atol {record['allclose']['atol']}, rtol {record['allclose']['rtol']}); results in {args.out}")
    return code


if __name__ == "__main__":
    sys.exit(main())
