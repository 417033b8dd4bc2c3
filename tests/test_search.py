"""Optimisation sweeps: ``objective=latency`` makes a job return a number, ``+search=...`` runs
hydra-optuna-sweeper over a space, the summary names the best *passing* trial, and the exit status
of a search counts failed jobs and whether any trial passed, not FAIL verdicts.

The objective and the exit-status rule are tested as functions; the search itself runs the real CLI
on the tiny twin (a subprocess for the full search, this process for the short failing one).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from ascendbench.callbacks.progress import SWEEP_EVENTS, SweepProgress, _job_status
from ascendbench.config import group_options
from ascendbench.config.schemas import Objective
from ascendbench.job import objective
from ascendbench.job.objective import INF, OBJECTIVES, job_outcome, objective_value, passes
from ascendbench.report.search import SECTION, Trial, best_trial, search_markdown, trials

from helpers import compose_config, run_app, run_cli

INF_CASES = {
    "FAIL verdict": {"status": "ok", "verdict": "FAIL"},
    "failed job": {"status": "failed", "verdict": None, "error": {"type": "TaskError"}},
    "no verdict": {"status": "ok", "verdict": None},
    "not run": {"status": "not run"},
}
# A FAIL planted where the search is fastest: with batch size 1 the cosine rule asks for more than
# 1.
PLANT_BATCH_1_FAILS = ["+planted={b1:1.1}",
                       "+metric.thresholds.cosine={min:'${oc.select:planted.b${preset.batch_size},0.0}',"
                       "source:planted}"]


def _record(verdict: str | None = "PASS", median_ms: float = 10.0, batch: int = 2,
            status: str = "ok") -> dict:
    return {"status": status, "verdict": verdict, "bench": {"latency": {"median_ms": median_ms}},
            "job": {"batch_size": batch}}


# --- the objective --------------------------------------------------------------------------------

def test_a_passing_trial_returns_its_median_latency():
    assert objective_value(_record(), "latency", "FAIL") == 10.0
    assert objective_value(_record(), "latency_per_sample", "FAIL") == 5.0
    assert objective_value(_record("WARN"), "latency", "FAIL") == 10.0, (
        "fail_on=FAIL lets WARN through")
    assert objective_value(_record("WARN"), "latency", None) == 10.0


@pytest.mark.parametrize("record", INF_CASES.values(), ids=INF_CASES.keys())
@pytest.mark.parametrize("fail_on", ["FAIL", "WARN", None])
def test_anything_but_a_passing_trial_returns_inf(record, fail_on):
    assert objective_value({**_record(), **record}, "latency", fail_on) == INF


def test_warn_returns_inf_when_fail_on_is_warn():
    assert (objective_value(_record("WARN"), "latency", "WARN") == INF
            and not passes(_record("WARN"), "WARN"))


def test_a_trial_without_a_median_returns_inf():
    unmeasured = {"status": "ok", "verdict": "PASS", "bench": None}
    assert objective_value(unmeasured, "latency", "FAIL") == INF


def test_without_an_objective_the_job_returns_its_status():
    assert job_outcome("ok", _record(), None, "FAIL") == {"status": "ok"}
    outcome = job_outcome("verdict FAIL", _record("FAIL"), "latency", "FAIL")
    assert outcome == {"status": "verdict FAIL", "objective": INF}


def test_the_schema_allows_exactly_the_objectives_there_are():
    assert {o.value for o in Objective} == set(OBJECTIVES)


def test_a_misspelt_objective_is_refused_before_any_job(tmp_path):
    result = run_app(["objective=latncy", "model=tiny_flux2_decoder", "device=cpu"], cwd=tmp_path)
    assert result.returncode == 1 and not result.job_dir.exists()
    assert "Invalid value 'latncy', expected one of [latency, latency_per_sample]" in result.stderr
    assert "full_key: objective" in result.stderr


@pytest.mark.parametrize(("outcomes", "code"), [
    ([{"status": "ok", "objective": 1.0}, {"status": "verdict FAIL", "objective": INF}], 0),
    # fail_on=null: FAIL is ok
    ([{"status": "ok", "objective": 1.0}, {"status": "ok", "objective": INF}], 0),
    ([{"status": "verdict FAIL", "objective": INF}], 1),  # nothing passed
    # a job failed
    ([{"status": "ok", "objective": 1.0}, {"status": "failed", "objective": INF}], 1),
    # a job did not run
    ([{"status": "ok", "objective": 1.0}, {"status": "busy", "objective": INF}], 1),
    ([], 1),
])
def test_exit_status_of_a_search(outcomes, code):
    assert objective.search_exit_status(outcomes) == code


# --- the best trial -------------------------------------------------------------------------------

def test_the_best_trial_is_the_fastest_passing_one_never_a_fail(tmp_path):
    records = {"fail_fastest": _record("FAIL", 1.0), "pass_slow": _record("PASS", 9.0),
               "warn_fast": _record("WARN", 4.0), "failed": _record(None, 0.5, status="failed")}
    rows = []
    for name, record in records.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "record.json").write_text(json.dumps(record))
        rows.append({"record": str(tmp_path / name / "record.json"),
                     "job_dir": str(tmp_path / name)})
    found = trials(pd.DataFrame(rows), "latency", "FAIL")
    assert best_trial(found).overrides == ["warn_fast"]
    assert best_trial(trials(pd.DataFrame(rows), "latency", "WARN")).overrides == ["pass_slow"]
    text = search_markdown(found, "latency", tmp_path)
    assert "`warn_fast`: 4 ms" in text and "2 of 4 record(s) passed" in text


def test_no_passing_trial_is_said_so():
    found = [Trial("r.json", ["dtype=bfloat16"], INF, 1.0, "FAIL")]
    assert best_trial(found) is None
    markdown = search_markdown(found, "latency", Path("."))
    assert "No trial passed (1 record(s)): nothing to name." in markdown


# --- the ready-made searches and the callbacks under Optuna ---------------------------------------

@pytest.mark.parametrize("name", group_options("search"))
def test_every_ready_made_search_composes_every_value_of_its_space(name):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    cfg = compose_config([f"+search={name}"], return_hydra_config=True)
    assert cfg.objective in OBJECTIVES and cfg.hydra.sweeper._target_.endswith("OptunaSweeper")
    assert cfg.hydra.sweeper.direction == "minimize" and cfg.hydra.sweeper.n_trials >= 6
    for key, space in cfg.hydra.sweeper.params.items():
        override = OverridesParser.create().parse_overrides([f"{key}={space}"])[0]
        assert override.is_sweep_override(), (name, key, space)
        for value in override.sweep_string_iterator():
            job = compose_config([f"+search={name}", f"{key}={value}"])
            chosen = job[key].name if key == "dtype" else OmegaConf.select(job, key)
            assert str(chosen).lower() == str(value).lower(), (name, key, value)


def test_progress_counts_the_trials_of_a_search(tmp_path):
    cfg = compose_config(["+search=tiny_cpu", f"hydra.sweep.dir={tmp_path}"],
                         return_hydra_config=True)
    SweepProgress(clock=lambda: 0.0).on_multirun_start(cfg)
    state = json.loads((tmp_path / SWEEP_EVENTS).read_text().splitlines()[0])
    assert (state["total"] == 8
            and set(state["keys"]) == {"dtype", "device.threads", "preset.batch_size"})


def test_progress_reads_a_numeric_return_as_passed_or_not():
    class Returned:
        def __init__(self, value):
            self.return_value = value

    assert _job_status(Returned(3.5)) == "ok" and _job_status(Returned(math.inf)) == "did not pass"


# --- real searches --------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_search_of_the_tiny_twin_names_the_fastest_passing_trial(tmp_path):
    """Six trials (the grid of batch 1, 2, 3 x 1, 2 threads) in batches of two; batch 1 is planted
    to FAIL."""
    sweep = tmp_path / "search"
    result = run_cli(["-m", "+search=tiny_cpu", "objective=latency", "dtype=choice(float32)",
                      "preset.batch_size=choice(1,2,3)", *PLANT_BATCH_1_FAILS],
                     cwd=tmp_path, out_dir=sweep, timeout=300)
    assert result.returncode == 0, "FAIL trials are outcomes of a search\n" + result.output[-3000:]
    records = {p.parent: json.loads(p.read_text()) for p in sweep.rglob("record.json")}
    assert len(records) == 6 and {r["status"] for r in records.values()} == {"ok"}
    failing = {d for d, r in records.items() if r["verdict"] == "FAIL"}
    assert failing and all(records[d]["job"]["batch_size"] == 1 for d in failing)
    passing = {d: r["bench"]["latency"]["median_ms"] for d, r in records.items()
               if r["verdict"] == "PASS"}
    fastest = min(passing, key=passing.get)

    summary = (sweep / "summary.md").read_text().split(SECTION, 1)[1]
    assert f"]({fastest.name}/record.json)" in summary and "4 of 6 record(s) passed" in summary
    assert not any(f"]({d.name}/record.json)" in summary for d in failing)
    overrides = (fastest / ".hydra" / "overrides.yaml").read_text()
    assert ("preset.batch_size=1" not in overrides
            and "preset.batch_size=1" not in summary.split("\n\n")[1])
    assert ("search: best passing trial" in result.stdout
            and str(fastest / "record.json") in result.stdout)
    assert "[sweep] job 6 of 6" in result.stdout, "job i of N counts the trials"
    assert len(pd.read_csv(sweep / "summary.csv")) == 6
    assert (sweep / "collect_env.txt").is_file() and (sweep / "optimization_results.yaml").is_file()


def test_a_failed_trial_keeps_its_record_and_the_search_goes_on_and_exits_1(tmp_path):
    """A job that fails (height 31 is not a multiple of the compression) and a FAIL: nothing passed,
    exit 1."""
    sweep = tmp_path / "search"
    result = run_app(["-m", "+search=tiny_cpu", "objective=latency", "dtype=choice(float32)",
                      "device.threads=choice(1)", "preset.batch_size=choice(1)",
                      "preset.height=choice(32,31)",
                      "hydra.callbacks.summary.collect_env_timeout_s=0", *PLANT_BATCH_1_FAILS],
                     cwd=tmp_path, out_dir=sweep)
    assert result.returncode == 1, result.output[-3000:]
    records = [json.loads(p.read_text()) for p in sweep.rglob("record.json")]
    by_height = {r["config"]["preset"]["height"]: r for r in records}
    assert len(records) == 2, "the failed trial did not stop the search"
    assert by_height[31]["status"] == "failed" and by_height[31]["error"]["type"] == "TaskError"
    assert by_height[32]["status"] == "ok" and by_height[32]["verdict"] == "FAIL"
    assert "No trial passed (2 record(s))" in (sweep / "summary.md").read_text()
