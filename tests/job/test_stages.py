"""The job as a list of stages: the run and the dry run walk the same list, each stage returns its
section."""

from __future__ import annotations

import json

import pytest

from ascendbench.job import runner as runner_module
from ascendbench.job.job import Job, merge_sections
from ascendbench.job.runner import run_job
from ascendbench.job.stages import STAGES

from helpers import TINY_RUN

FAST = ["model=tiny_flux2_decoder", *TINY_RUN, "baseline.process=in-process",
        "compare.visual.enabled=false",
        "artifacts.media=false"]


class Spy:
    """Wraps a stage: records which of plan/run was called and what the stage returned."""

    def __init__(self, stage, calls):
        self.stage, self.calls = stage, calls
        self.name, self.label = stage.name, stage.label

    def plan(self, job):
        self.calls.append(("plan", self.name))
        return self.stage.plan(job)

    def run(self, job):
        section = self.stage.run(job)
        self.calls.append(("run", self.name, sorted(section)))
        return section


@pytest.fixture
def spied(monkeypatch):
    calls: list = []
    monkeypatch.setattr(runner_module, "STAGES", tuple(Spy(s, calls) for s in STAGES))
    return calls


def test_the_stage_list_is_the_design_data_flow():
    assert [s.name for s in STAGES] == ["config", "device", "load", "inputs", "reference",
                                        "device_run", "evaluate", "replay_reference", "compare",
                                        "artifacts"]
    assert all(s.label and callable(s.plan) and callable(s.run) for s in STAGES)


def test_a_run_calls_every_stage_once_and_each_section_lands_in_the_record(compose_cfg, tmp_path,
                                                                           spied):
    record = run_job(compose_cfg([*FAST, f"baseline.cache_dir={tmp_path / 'cache'}"]),
                     tmp_path / "job")
    assert record["status"] == "ok", record["error"]
    assert [c[:2] for c in spied] == [("run", s.name) for s in STAGES]
    sections = {c[1]: c[2] for c in spied}
    assert sections["device"] == ["env", "job"] and sections["load"] == ["weights"]
    assert sections["device_run"] == ["bench", "outputs", "patches", "pipeline", "placement_check"]
    assert "metrics" in sections["evaluate"]
    on_disk = json.loads((tmp_path / "job" / "record.json").read_text())
    for key in ("job", "weights", "inputs", "baseline", "bench", "metrics", "verdict", "artifacts"):
        assert on_disk[key] == record[key] and on_disk[key] is not None, key
    # a later stage adds to an earlier stage's section
    assert on_disk["job"]["reference_dtype"] == "float64"
    assert list(on_disk["timing"]["stages_s"]) == [s.name for s in STAGES]
    assert on_disk["timing"]["finished_at"]


def test_a_dry_run_plans_every_stage_and_runs_none(compose_cfg, tmp_path, spied):
    record = run_job(compose_cfg([*FAST, "dry_run=true",
                                  f"baseline.cache_dir={tmp_path / 'cache'}"]), tmp_path / "d")
    assert record["status"] == "ok", record["error"]
    assert spied == [("plan", s.name) for s in STAGES]
    plan = record["plan"]
    assert set(plan) >= {"job", "weights", "inputs", "memory", "baseline", "outputs", "problems"}
    assert record["weights"] is None and record["bench"] is None and record["metrics"] == {}


@pytest.mark.parametrize("override, words", [
    # below min_iters: a cross-field rule
    ("preset.max_iters=2", "preset.max_iters"),
    ("preset.height=33", "preset.height=33"),                    # the task cannot build its inputs
    ("compare.layers=[no_such_block]", "no_such_block"),          # a layer pattern matching nothing
    ("model.weights=required", "model.weights=required"),        # no weights at model.source
])
def test_what_the_real_job_rejects_the_dry_run_reports(compose_cfg, tmp_path, override, words):
    cfg = [*FAST, "preset.iters=null", f"baseline.cache_dir={tmp_path / 'cache'}", override]
    real = run_job(compose_cfg(cfg), tmp_path / "real")
    planned = run_job(compose_cfg([*cfg, "dry_run=true"]), tmp_path / "plan")
    assert real["status"] == "failed" and words in real["error"]["message"]
    assert planned["status"] == "failed" and planned["error"]["reason"] == "dry_run"
    assert any(words in problem
               for problem in planned["plan"]["problems"]), planned["plan"]["problems"]
    assert real["bench"] is None, "the real job failed before the device run"


def test_merge_sections_merges_mappings_one_level_and_replaces_the_rest():
    into = {"job": {"a": 1}, "verdict": "PASS", "metrics": {"x": 1}}
    merge_sections(into, {"job": {"b": 2}, "verdict": "FAIL", "metrics": {"y": 2}, "new": [1]})
    assert into == {"job": {"a": 1, "b": 2}, "verdict": "FAIL", "metrics": {"x": 1, "y": 2},
                    "new": [1]}


def test_attempt_turns_our_errors_into_problems_and_others_into_notes(tmp_path):
    from ascendbench.errors import ConfigError
    from ascendbench.job.record import RecordWriter

    job = Job(cfg=None, dir=tmp_path, writer=RecordWriter(tmp_path, {}))

    def ours():
        raise ConfigError("preset.x=1 is not allowed")

    def theirs():
        raise KeyError("k")

    assert job.attempt("a", ours,
                       "default") == "default" and job.problems == ["preset.x=1 is not allowed"]
    assert job.attempt("b", theirs) == {"unavailable": "b: KeyError: 'k'"}


def test_a_dry_run_on_a_missing_device_still_plans_the_rest(compose_cfg, tmp_path, capsys):
    record = run_job(compose_cfg([*FAST, "device=npu", "dry_run=true"]), tmp_path / "npu")
    problems = record["plan"]["problems"]
    assert record["status"] == "failed" and any("torch_npu" in p for p in problems), problems
    assert record["plan"]["weights"]["action"] == "random-init"
    assert record["plan"]["inputs"]["latent"]
    assert "could not be set up" in record["plan"]["baseline"]["reason"]
    out = capsys.readouterr().out
    assert "dry run: tiny_flux2_decoder on npu (not set up)" in out and "PROBLEM" in out
