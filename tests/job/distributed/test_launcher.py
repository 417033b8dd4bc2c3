"""How the parent names a failed rank, and the checks a rank makes before it times anything."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from torch.multiprocessing.spawn import ProcessExitedException, ProcessRaisedException

from ascendbench.errors import RankFailedError, WeightsDigestError
from ascendbench.job.distributed import ranks
from ascendbench.job.distributed.modes import parallel_settings

SETTINGS = parallel_settings({"world_size": 2, "parallel": "cfg"}, "cpu")


def test_a_rank_that_raised_is_named_with_its_own_message(tmp_path):
    (tmp_path / "rank1.error.json").write_text(json.dumps({"type": "TaskError",
                                                           "message": "the pipe broke\nhere"}))
    error = ranks._rank_failure(ProcessRaisedException("Traceback ...", 1, 4242), SETTINGS,
                                tmp_path, [41, 4242])
    assert isinstance(error, RankFailedError) and error.reason == "rank_failed"
    assert ("rank 1 of 2 (pid 4242) failed: TaskError: the pipe broke here during the device run"
            in str(error))
    assert str(tmp_path / "rank1.log") in str(error)


def test_a_rank_that_left_no_note_is_named_by_the_last_traceback_line(tmp_path):
    exc = ProcessRaisedException("Traceback:\n  File x\nRuntimeError: gloo timed out", 0, 7)
    assert "rank 0 of 2 (pid 7) failed: RuntimeError: gloo timed out" in str(
        ranks._rank_failure(exc, SETTINGS, tmp_path, [7, 8]))


def test_a_rank_that_exited_is_named_with_its_status(tmp_path):
    exc = ProcessExitedException("exited", 1, 8, exit_code=3)
    assert "rank 1 of 2 (pid 8) exited with status 3" in str(ranks._rank_failure(exc, SETTINGS,
                                                                                 tmp_path, [7, 8]))


def test_a_rank_with_other_weights_refuses_to_run():
    with pytest.raises(WeightsDigestError, match="rank 1 loaded weights of digest sha256:bbb"):
        ranks._check_digest(1, "sha256:bbb", "sha256:aaa")
    ranks._check_digest(1, "sha256:bbb", "sha256:bbb")


def test_every_rank_gets_a_fixed_budget():
    from omegaconf import OmegaConf

    bench = OmegaConf.create({"iters": None, "min_iters": 5, "max_time_s": 30, "min_time_s": 0.5,
                              "precision": 0.01,
                              "warmup_max": 20, "flops": {"enabled": True}})
    fixed = ranks.rank_bench(bench)
    assert (fixed.iters, fixed.warmup_max, fixed.precision, fixed.flops.enabled) == (5, None, None,
                                                                                     False)
    assert fixed.max_time_s >= 1e9


class _FakeNpuRuntime:
    """The part of ``torch.npu`` a rank uses, with torch_npu 2.9.0's signature
    (torch_npu/npu/utils.py:88 ``def set_device(device)``)."""

    def __init__(self, calls: list) -> None:
        self.calls = calls

    def set_device(self, device):
        self.calls.append(("set_device", device))


def test_an_npu_rank_binds_its_card_before_joining_the_hccl_group(monkeypatch):
    import torch

    calls: list = []
    monkeypatch.setattr(ranks.dist, "init_process_group",
                        lambda backend,
                        **kw: calls.append(("init_process_group", backend, kw["rank"])))
    adapter = SimpleNamespace(runtime=_FakeNpuRuntime(calls), index=1,
                              torch_device=torch.device("meta"))
    settings = parallel_settings({"world_size": 2, "parallel": "device_map"}, "npu")
    ranks.join_group(1, adapter, settings)
    assert calls == [("set_device", 1), ("init_process_group", "hccl", 1)]
    assert ranks.modes._DEVICE["device"] == torch.device("meta")  # collectives: on the rank's card
    ranks.modes.set_rank_device(torch.device("cpu"))
