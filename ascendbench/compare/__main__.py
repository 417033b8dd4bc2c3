"""``python -m ascendbench.compare REF CAND``: two saved outputs judged as a job judges."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from ascendbench.compare import csvfile, msprobe
from ascendbench.compare.files import UnusableInput, pair_outputs, read_outputs
from ascendbench.compare.layers import hidden_rules, judge_dumps
from ascendbench.config.targets import build
from ascendbench.digits import judged_rule, judged_value
from ascendbench.fileio import write_atomic
from ascendbench.metrics.suite import judged_output
from ascendbench.metrics.verdict import worst
from ascendbench.precision import Precision

METRICS = ("image", "video", "regression", "tokens")
ALWAYS_SHOWN = ("max_abs_err", "mean_rel_err", "cosine")  # the seeds' headline numbers
DTYPES = ("float32", "float16", "bfloat16")
HALF_NAMES = {torch.bfloat16: "bfloat16", torch.float16: "float16"}
RECORD_DEPTH = 3  # how many directories above the candidate are searched for the job's record.json


def parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m ascendbench.compare", description=(
        "Judge a candidate output against a reference output with ascendbench's metric suites and "
        "verdict rules. Formats: .safetensors, .npy, .pt/.pth (weights_only), PNG/JPEG images, mp4 "
        "videos, directories of frames. Exit 0 PASS/WARN, 1 FAIL, 2 unusable input."))
    p.add_argument("reference", type=Path, help="the reference output (e.g. the CPU or GPU run)")
    p.add_argument("candidate", type=Path, help="the candidate output (e.g. the NPU run)")
    p.add_argument("--atol", type=float, help="allclose absolute tolerance (a judged rule)")
    p.add_argument("--rtol", type=float, help="allclose relative tolerance (a judged rule)")
    p.add_argument("--metric", choices=METRICS, help="the metric suite (default: tokens for "
                   "integers, image for [N, 1|3, H, W], else regression; video only if given)")
    p.add_argument("--dtype", choices=DTYPES, help="whose verdict rules apply (default: the "
                   "candidate's half dtype, else job.dtype of a record.json beside it, or float32)")
    p.add_argument("--out", type=Path, default=Path("compare_out"), help="output directory")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="a config override, e.g. metric.thresholds.cosine={min:0.999} (repeatable)")
    p.add_argument("--pictures", action="store_true", help="also draw side-by-side PNGs")
    return p


def infer_metric(tensors: Mapping[str, torch.Tensor]) -> str:
    """``tokens`` for integer ids, ``image`` for [N, 1|3, H, W], else ``regression``."""
    first = judged_output(*next(iter(tensors.items())))
    if not first.is_floating_point():
        return "tokens"
    return "image" if first.dim() == 4 and first.shape[1] in (1, 3) else "regression"


def infer_dtype(tensors: Mapping[str, torch.Tensor], path: Path,
                given: str | None) -> tuple[str, str]:
    """``(dtype, where from)``: ``--dtype``, a half dtype, a nearby record's dtype, float32."""
    if given:
        return given, "--dtype"
    own = HALF_NAMES.get(next(iter(tensors.values())).dtype)
    if own:
        return own, "the candidate file's dtype"
    here = Path(path).resolve()
    folders = [here if here.is_dir() else here.parent, *here.parents][:RECORD_DEPTH + 1]
    record = next((f / "record.json" for f in folders if (f / "record.json").is_file()), None)
    try:
        dtype = (json.loads(record.read_text()).get("job") or {}).get("dtype") if record else None
    except (OSError, ValueError, AttributeError):
        dtype = None
    if dtype in DTYPES:
        return dtype, f"job.dtype of {record}"
    return "float32", "the candidate file's dtype"


def looks_half(tensors: Mapping[str, torch.Tensor]) -> str | None:
    """The half dtype that holds every value of all-float32 ``tensors`` exactly, else ``None``."""
    values = [t.nan_to_num() for t in tensors.values() if t.dtype == torch.float32]
    return next((name for dtype, name in HALF_NAMES.items() if len(values) == len(tensors)
                 and all(torch.equal(t.to(dtype).float(), t) for t in values)), None)


def compose_config(args: argparse.Namespace, metric: str, dtype: str) -> Any:
    """The job config of this comparison (only its metric and dtype are used)."""
    overrides = [f"metric={metric}", f"dtype={dtype}", "device=cpu"]
    overrides += [f"dtype.atol={args.atol}"] if args.atol is not None else []
    overrides += [f"dtype.rtol={args.rtol}"] if args.rtol is not None else []
    if args.atol is not None or args.rtol is not None:
        overrides.append("+metric.thresholds.allclose_mismatch_ratio={max: 0.0, source: 'compare "
                         "--atol/--rtol: every element within atol + rtol * |ref|'}")
    GlobalHydra.instance().clear()  # the block restores this state when it ends
    with initialize_config_module(config_module="ascendbench.conf", version_base="1.3"):
        return compose(config_name="config", overrides=overrides + list(args.overrides))


def compare_dumps(args: argparse.Namespace, golden: Path, target: Path) -> tuple[int, dict]:
    """Two msprobe dumps: each forward output judged as a hooked layer, the first that FAILs."""
    first_float = next(t for t in msprobe.read_dump(target).values() if t.is_floating_point())
    dtype, dtype_from = infer_dtype({"x": first_float}, target, args.dtype)
    cfg = compose_config(args, "regression", dtype)
    precision = Precision.build(cfg, "cpu")
    rows, first = judge_dumps(golden, target, hidden_rules(cfg.compare, precision),
                                      precision.allclose())
    failed = [r for r in rows if r["result"] == "FAIL"]
    csvfile.write_compare_csv(args.out / "compare.csv", rows)
    record = {"status": "ok", "verdict": "FAIL" if failed else "PASS", "dtype_rules": dtype,
              "dtype_from": dtype_from, "golden": str(golden), "target": str(target),
              "entries": len(rows), "failed": len(failed), "first_divergent": first}
    write_atomic(args.out / "record.json", json.dumps(record, indent=1, default=str))
    lines = [f"{'entry (execution order)':58} {'cosine':>10} {'max_abs_err':>11}  result"]
    lines += [f"{r['name'][:58]:58} {r.get('cosine', float('nan')):10.6f} "
              f"{r.get('max_abs_err', float('nan')):11.4g}  {r['result'] or '-'}"
              for r in (failed or rows)[:10]]
    more = len(failed or rows) - 10
    lines += [f"... {more} more (all in {args.out / 'compare.csv'})"] if more > 0 else []
    print("\n".join(lines) + f"\nverdict {record['verdict']}: {len(failed)} of {len(rows)} "
          f"entries FAIL ({dtype} rules from {dtype_from}); first divergent entry: "
          f"{first or 'none'}")
    return (1 if failed else 0), record


def run_compare(args: argparse.Namespace) -> tuple[int, dict[str, Any]]:
    """Compare and write the results: (exit code, record); UnusableInput for unusable inputs."""
    from ascendbench.tasks.inputs import summarize  # deferred: ascendbench.tasks imports diffusers

    dumps = [msprobe.dump_dir(p) for p in (args.reference, args.candidate)]
    if all(dumps):
        return compare_dumps(args, *dumps)
    reference, candidate = pair_outputs(read_outputs(args.reference), read_outputs(args.candidate))
    metric = args.metric or infer_metric(reference)
    dtype, dtype_from = infer_dtype(candidate, args.candidate, args.dtype)
    cfg = compose_config(args, metric, dtype)
    precision = Precision.build(cfg, "cpu")  # the suite with the dtype rules, as a job evaluates
    suite = build(cfg.metric, "metric")
    metrics = suite.evaluate(reference, candidate, dict(precision.rules), **precision.allclose())
    verdict = worst(m.get("verdict") for m in metrics.values() if isinstance(m, Mapping))
    record = {"status": "ok", "verdict": verdict, "metric": metric, "dtype_rules": dtype,
              "dtype_from": dtype_from, "looks": verdict == "FAIL" and looks_half(candidate),
              "allclose": {"atol": float(cfg.dtype.atol), "rtol": float(cfg.dtype.rtol)},
              "reference": {"path": str(args.reference), "tensors": summarize(reference)},
              "candidate": {"path": str(args.candidate), "tensors": summarize(candidate)},
              "metrics": metrics}
    rows = csvfile.output_rows(reference, candidate, metrics)
    csvfile.write_compare_csv(args.out / "compare.csv", rows)
    rows = msprobe.msprobe_rows(reference, candidate, {r["name"]: r for r in rows})
    csvfile.write_compare_csv(args.out / "compare_msprobe.csv", rows, msprobe.COLUMNS)
    if args.pictures:
        from ascendbench.compare.visual import render_output  # deferred: matplotlib is heavy

        record["pictures"] = [p.name for name, ref in reference.items()
                              for p in render_output(name, ref, candidate[name], args.out, {})]
    write_atomic(args.out / "record.json", json.dumps(record, indent=1, default=str))
    return (1 if verdict == "FAIL" else 0), record


def main(argv: Sequence[str] | None = None) -> int:
    """Run one comparison and print its summary."""
    args = parser().parse_args(argv)
    try:
        code, record = run_compare(args)
        if "metrics" not in record:  # msprobe dumps: printed as they were compared
            return code
    except UnusableInput as exc:
        print(f"compare: unusable input: {exc}. Give two outputs of the same names and shapes in "
              "one of the formats of `python -m ascendbench.compare --help`.", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a config error (bad --set) is a usage error
        print(f"compare: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    for name, entry in record["metrics"].items():
        if "value" in entry and (entry.get("verdict") or name.rsplit("/", 1)[-1] in ALWAYS_SHOWN):
            rule = f"  ({judged_rule(name, entry)})" if entry.get("verdict") else ""
            rule += f"  (not judged: {entry['not_judged']})" if entry.get("not_judged") else ""
            print(f"{name:28} {judged_value(name, entry):>14}  {entry.get('verdict') or '-'}{rule}")
    print(f"verdict {record['verdict']}  ({record['metric']} suite, {record['dtype_rules']} rules "
          f"from {record['dtype_from']}; atol {record['allclose']['atol']}, rtol "
          f"{record['allclose']['rtol']}); results in {args.out}")
    if record["looks"] and record["dtype_rules"] == "float32":
        print(f"hint: every candidate value is exactly representable in {record['looks']}: the "
              f"values look {record['looks']}; rerun with its rules: --dtype {record['looks']}")
    return code


if __name__ == "__main__":
    sys.exit(main())
