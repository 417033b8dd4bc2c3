"""msprobe beside ascendbench, with the real mindstudio-probe: a job's dumps read by msprobe's own
compare, msprobe's dumps read by ``python -m ascendbench.compare``, msprobe's numbers recomputed."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ascendbench.compare import msprobe
from ascendbench.compare.__main__ import main as compare_main
from ascendbench.compare.files import UnusableInput
from ascendbench.errors import MissingPackageError
from ascendbench.report.__main__ import main as report_main

from helpers.app import TINY_RUN, run_app
from helpers.planted import PlantedForwardFault  # noqa: F401 - registers the planted patch

pytest.importorskip("msprobe", reason="mindstudio-probe (the dev extra) is not installed")

FAULTY = "decoder.up_blocks.1.resnets.0.conv1"
MODEL = ["model=tiny_flux2_decoder", "metric=regression", "compare.visual.enabled=false",
         "artifacts.media=false", "preset.iters=1", "preset.min_iters=1", "preset.height=16",
         "preset.width=16", "bench.flops.enabled=false", "fail_on=null", "compare.msprobe=true",
         "compare.msprobe_level=L0", "baseline.reference=same"]
# A 4-layer net dumped by msprobe's PrecisionDebugger in a process of its own (it is a singleton
# whose hooks patch torch process-wide); argv: dtype, dump path, index of a layer to break or -1.
NET = """
import json, sys, torch
from msprobe.pytorch import PrecisionDebugger
dtype, out, broken = getattr(torch, sys.argv[1]), sys.argv[2], int(sys.argv[3])
cfg = {"task": "tensor", "dump_path": out, "rank": [], "step": [], "level": "mix",
       "async_dump": False, "tensor": {"scope": [], "list": [], "data_mode": ["all"]}}
json.dump(cfg, open(out + ".json", "w"))
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.GroupNorm(2, 8),
                          torch.nn.SiLU(), torch.nn.Conv2d(8, 3, 3, padding=1)).to(dtype)
if broken >= 0:  # inside the module's forward, after its API call
    net[broken].forward = (lambda f: lambda x: f(x) * 3 + 0.5)(net[broken].forward)
x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1)).to(dtype)
debugger = PrecisionDebugger(config_path=out + ".json")
debugger.start(model=net)
with torch.no_grad():
    net(x)
debugger.stop()
debugger.step()
"""


def _dump(tmp_path: Path, name: str, dtype: str, broken: int = -1) -> Path:
    out = tmp_path / name
    subprocess.run([sys.executable, "-c", NET, dtype, str(out), str(broken)], check=True,
                   capture_output=True, cwd=tmp_path)
    return out / "step0"


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """msprobe's own dumps of one net: float32 (golden), bfloat16, bfloat16 with a broken layer."""
    tmp_path = tmp_path_factory.mktemp("dumps")
    return {"golden": _dump(tmp_path, "golden", "float32"),
            "bf16": _dump(tmp_path, "bf16", "bfloat16"),
            "broken": _dump(tmp_path, "broken", "bfloat16", broken=3)}


def test_compare_reads_msprobe_dumps_and_names_the_first_divergent_api(dumps, tmp_path, capsys):
    assert compare_main([str(dumps["golden"]), str(dumps["bf16"]), "--out",
                         str(tmp_path / "ok")]) == 0
    record = json.loads((tmp_path / "ok" / "record.json").read_text())
    assert record["dtype_rules"] == "bfloat16" and record["first_divergent"] is None
    assert record["entries"] >= 8  # 4 APIs and 4 modules, each output paired by dump.json name
    proc = msprobe.dump_dir(dumps["broken"])
    assert compare_main([str(dumps["golden"]), str(proc), "--out", str(tmp_path / "bad")]) == 1
    record = json.loads((tmp_path / "bad" / "record.json").read_text())
    # the last Conv2d module is the first entry that breaks its rules, in execution order
    assert record["first_divergent"] == "Module.3.Conv2d.forward.0.output.0"
    printed = capsys.readouterr().out
    assert "first divergent entry: Module.3.Conv2d.forward.0.output.0" in printed


def test_max_relative_err_and_the_other_numbers_agree_with_msprobes_compare(dumps, tmp_path):
    from msprobe.pytorch.compare.distributed_compare import compare_distributed

    compare_distributed(str(dumps["bf16"]), str(dumps["golden"]), str(tmp_path))
    with next(tmp_path.glob("compare_result*.csv")).open(newline="") as handle:
        rows = {r["NPU Name"]: r for r in csv.DictReader(handle)}
    golden, target = (msprobe.dump_dir(dumps[k]) / "dump_tensor_data" for k in ("golden", "bf16"))
    checked = 0
    for name in rows:
        if not (target / f"{name}.pt").is_file() or ".output." not in name:
            continue
        ours = msprobe.msprobe_numbers(torch.load(target / f"{name}.pt"),
                                       torch.load(golden / f"{name}.pt"))
        for column in msprobe.NUMBERS:
            assert ours[column] == pytest.approx(float(rows[name][column]), rel=1e-6, abs=1e-9)
        checked += 1
    assert checked >= 8 and float(rows[name]["MaxRelativeErr"]) > 0.0


def test_a_job_leaves_dumps_msprobe_compares_and_both_flag_the_planted_fault(tmp_path):
    args = [*MODEL, *TINY_RUN, "preset.height=16", "preset.width=16",
            f"baseline.cache_dir={tmp_path / 'cache'}",
            f"model.patches=[{{name:planted_forward_fault,module:{FAULTY},devices:[cpu]}}]"]
    result = run_app(args, tmp_path)
    record = json.loads((result.job_dir / "record.json").read_text())
    assert record["status"] == "ok", (result.output[-3000:], record.get("error"))
    info = record["compare"]["msprobe"]
    assert (result.job_dir / info["device"] / "dump.json").is_file()
    assert (result.job_dir / info["reference"] / "dump.json").is_file()
    rows = list(csv.DictReader((result.job_dir / info["result_csv"]).open(newline="")))
    hooked = {r["NPU Name"].split(".forward")[0] for r in rows}
    assert f"Module.{FAULTY}.Conv2d" in hooked and len(hooked) >= 40  # a row per module
    assert info["first_flagged"]["name"] == f"Module.{FAULTY}.Conv2d.forward.0.output.0"
    assert info["first_divergent"] == f"Module.{FAULTY}.Conv2d.forward.0.output.0"
    assert "msprobe   dumps" in result.output and "CANN" not in result.output
    assert report_main([str(result.job_dir), "--out", str(tmp_path / "report"), "--no-plots"]) == 0
    report = (tmp_path / "report" / "report.md").read_text()
    assert "msprobe: first flagged row" in report and f"Module.{FAULTY}.Conv2d" in report


def test_without_msprobe_the_error_names_the_package(monkeypatch):
    monkeypatch.setattr(msprobe.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MissingPackageError, match=r"pip install mindstudio-probe==26\.2\.0"):
        msprobe.require()


def test_without_msprobe_a_job_fails_at_its_config_check_before_any_run(tmp_path, monkeypatch):
    real = msprobe.importlib.util.find_spec
    monkeypatch.setattr(msprobe.importlib.util, "find_spec",
                        lambda name, *a: None if name == "msprobe" else real(name, *a))
    result = run_app([*MODEL, *TINY_RUN, f"baseline.cache_dir={tmp_path / 'cache'}"], tmp_path)
    record = json.loads((result.job_dir / "record.json").read_text())
    assert result.returncode != 0 and record["status"] == "failed"
    assert "pip install mindstudio-probe==26.2.0" in result.output
    assert record["error"]["reason"] == "missing_package"
    assert record["baseline"] is None and record["bench"] is None, "nothing ran after the check"


def test_dump_names_are_data(dumps, tmp_path):
    proc = tmp_path / "proc0"
    (proc / "dump_tensor_data").mkdir(parents=True)
    entry = {"output": [{"type": "torch.Tensor", "data_name": "../../evil.pt"}]}
    (proc / "dump.json").write_text(json.dumps({"data": {"Functional.x.0.forward": entry}}))
    with pytest.raises(UnusableInput, match="not a file of"):
        msprobe.read_dump(proc)
    (tmp_path / "proc1").mkdir()
    (tmp_path / "proc1" / "dump.json").write_text("{}")
    with pytest.raises(UnusableInput, match="holds 2 msprobe dumps"):
        msprobe.dump_dir(tmp_path)
    assert compare_main([str(dumps["golden"]), str(proc), "--out", str(tmp_path / "o")]) == 2
