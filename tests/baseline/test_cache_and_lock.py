"""The cache: concurrent jobs compute a reference once; in-process mode is refused where torch_npu
is found."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from hydra.errors import ConfigCompositionException
from hydra.utils import instantiate

from ascendbench.baseline import service
from ascendbench.baseline.service import ReferenceQuery, get_or_compute
from ascendbench.errors import ConfigError
from ascendbench.tasks.inputs import describe

from helpers import TINY_RUN, build_tiny_flux2

RANDOM0 = {"kind": "random-init", "init_seed": 0}


def _job(compose_cfg, tmp_path, *overrides):
    cfg = compose_cfg(["model=tiny_flux2_decoder", *TINY_RUN, "baseline.process=in-process",
                       f"baseline.cache_dir={tmp_path / 'cache'}", *overrides])
    task = instantiate(cfg.model.task)
    inputs = task.make_inputs(cfg.preset, cfg.seed)
    return cfg, task, inputs, describe(inputs)


def test_concurrent_jobs_compute_the_reference_once_and_the_waiters_reuse_it(compose_cfg, tmp_path,
                                                                            monkeypatch):
    cfg, task, inputs, info = _job(compose_cfg, tmp_path)
    weights = {"kind": "random-init", "init_seed": 42}
    calls = []
    real = service.run_reference

    def slow_reference(*args, **kwargs):
        calls.append(threading.get_ident())
        time.sleep(1.0)  # hold the lock long enough for the other jobs to queue behind it
        return real(*args, **kwargs)

    monkeypatch.setattr(service, "run_reference", slow_reference)
    results = {}
    models = [build_tiny_flux2() for _ in range(3)]  # first: diffusers' lazy imports race

    def job(index):
        query = ReferenceQuery(cfg, task, inputs, torch.float64, weights, info, models[index],
                               tmp_path / f"j{index}")
        results[index] = get_or_compute(query)

    threads = [threading.Thread(target=job, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1, "one job computes, the others wait for the lock and read the cache"
    hits = sorted(r.info["cache_hit"] for r in results.values())
    assert hits == [False, True, True]
    assert max(r.info["waited_s"] for r in results.values()) > 0.5
    first = results[0]["image"]
    assert all(torch.equal(r["image"], first) for r in results.values())
    assert first.dtype == torch.float64


def test_cache_false_recomputes(compose_cfg, tmp_path):
    cfg, task, inputs, info = _job(compose_cfg, tmp_path, "baseline.cache=false")
    weights = {"kind": "random-init", "init_seed": 42}
    for _ in range(2):
        query = ReferenceQuery(cfg, task, inputs, torch.float64, weights, info, build_tiny_flux2(),
                               tmp_path)
        result = get_or_compute(query)
        assert result.info["cache_hit"] is False and result.info["process"] == "in-process"


def test_in_process_restores_the_model_to_float32(compose_cfg, tmp_path):
    cfg, task, inputs, info = _job(compose_cfg, tmp_path)
    model = build_tiny_flux2()
    get_or_compute(ReferenceQuery(cfg, task, inputs, torch.float64, RANDOM0, info, model, tmp_path))
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_in_process_is_refused_where_torch_npu_can_be_imported(compose_cfg, tmp_path, monkeypatch):
    fake = tmp_path / "site"
    (fake / "torch_npu").mkdir(parents=True)
    (fake / "torch_npu" / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
    monkeypatch.syspath_prepend(str(fake))
    cfg, task, inputs, info = _job(compose_cfg, tmp_path)
    with pytest.raises(ConfigError, match="torch_npu is importable"):
        get_or_compute(ReferenceQuery(cfg, task, inputs, torch.float64, RANDOM0, info,
                                      build_tiny_flux2(), tmp_path))


def test_unknown_process_option_is_refused_at_compose_time(compose_cfg, tmp_path):
    with pytest.raises(ConfigCompositionException) as err:
        _job(compose_cfg, tmp_path, "baseline.process=thread")
    assert "baseline.process" in str(err.value) + str(err.value.__cause__)


def test_a_layer_pattern_matching_nothing_fails_before_any_reference_run(compose_cfg, tmp_path):
    cfg, task, inputs, info = _job(compose_cfg, tmp_path, "compare.layers=[no_such_block]")
    with pytest.raises(ConfigError, match="no_such_block"):
        get_or_compute(ReferenceQuery(cfg, task, inputs, torch.float64, {}, info,
                                      build_tiny_flux2(), tmp_path))
    assert not (tmp_path / "cache").exists()
