"""The job's timing history: reruns of one workload leave their medians under ``bench.history.dir``,
and from the fourth run on the record's interval weighs the spread between them
(``bench.interval.runs``)."""

from __future__ import annotations

import json

from omegaconf import open_dict

from ascendbench.bench.history import run_history, workload_key

from helpers import run_job


def _cfg(cfg, folder, **bench):
    with open_dict(cfg):
        # a fixed count of 8 timed calls (a run under 6 calls leaves no median)
        cfg.preset.iters = 8
        cfg.bench.history.dir = str(folder)
        for key, value in bench.items():
            cfg.bench.history[key] = value
    return cfg


def test_reruns_of_a_job_give_the_between_runs_term(cfg_tiny, tmp_path):
    cfg = _cfg(cfg_tiny, tmp_path / "timing")
    records = [run_job(cfg, tmp_path / f"job{i}") for i in range(4)]
    assert all(r["status"] == "ok" for r in records)
    assert [("runs" in r["bench"]["interval"]) for r in records] == [False, False, False, True]
    runs = records[3]["bench"]["interval"]["runs"]
    earlier = [r["bench"]["latency"]["median_ms"] for r in records[:3]]
    assert runs["earlier_ms"] == earlier and runs["sd_log"] >= 0
    files = list((tmp_path / "timing").iterdir())
    body = json.loads(files[0].read_text())
    assert len(files) == 1
    assert files[0].name == f"{body['key']}.json" == f"{workload_key(body['material'])}.json"
    last = records[3]["bench"]["latency"]["median_ms"]
    assert [r["median_ms"] for r in body["runs"]] == [*earlier, last]
    assert body["material"]["dtype"] == "float32" and body["material"]["device_name"]


def test_history_off_writes_nothing_and_adds_no_interval(cfg_tiny, tmp_path):
    cfg = _cfg(cfg_tiny, tmp_path / "timing", enabled=False)
    records = [run_job(cfg, tmp_path / f"job{i}") for i in range(4)]
    assert not (tmp_path / "timing").exists()
    assert all("runs" not in r["bench"]["interval"] for r in records)


def test_the_workload_is_the_model_device_dtype_and_sizes_not_the_budget(cfg_tiny, tmp_path):
    cfg = _cfg(cfg_tiny, tmp_path)
    key = run_history(cfg, _Adapter(), "float32").key
    with open_dict(cfg):
        cfg.preset.iters, cfg.preset.max_time_s, cfg.bench.precision = 20, 5.0, 0.02
    assert run_history(cfg, _Adapter(),
                       "float32").key == key, "the timing budget is not the workload"
    assert run_history(cfg, _Adapter(), "bfloat16").key != key
    for change in (("preset", "height", 64), ("preset", "batch_size", 2), ("device", "threads", 1)):
        other = _cfg(cfg.copy(), tmp_path)
        with open_dict(other):
            other[change[0]][change[1]] = change[2]
        assert run_history(other, _Adapter(), "float32").key != key, change
    assert run_history(cfg, _Adapter("another chip"), "float32").key != key


class _Adapter:
    def __init__(self, name: str = "cpu"):
        self.name = name

    def device_name(self) -> str:
        return self.name
