"""The reference process's progress (child lines, the job's heartbeat) and the patches it runs
with."""

from __future__ import annotations

import io
import json

import torch

from ascendbench.baseline.compute import BlockProgress, count_blocks, progress_modules
from ascendbench.baseline.key import reference_patches
from ascendbench.baseline.process import PROGRESS_PREFIX, ChildExit, follow_child_progress
from ascendbench.progress import ProgressOptions, job_name
from ascendbench.tasks.vae_decode import VaeDecodeTask

from helpers import build_tiny_flux2


class FakeClock:
    """A clock that advances only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_only_patches_declared_for_the_reference_apply_there():
    specs = ["flex_attention_dense", {"name": "diffusers_attention_backend", "devices": ["npu"]},
             {"name": "flex_attention_dense", "reference": True, "attention_attrs": ["x"]},
             {"name": "other", "reference": False}]
    assert reference_patches(specs) == [{"name": "flex_attention_dense", "attention_attrs": ["x"]}]
    assert reference_patches(None) == []


def test_blocks_of_a_decoder_are_counted_on_meta_and_reported_with_their_total():
    model, task = build_tiny_flux2(), VaeDecodeTask(4, 2)
    inputs = task.make_inputs({"height": 32, "width": 32, "batch_size": 1}, 0)
    blocks = progress_modules(model)
    assert len(blocks) == 2 + 1 + 2 + 1  # encoder: 2 down blocks and a mid; decoder: 2 up and a mid
    total = count_blocks(model, task, inputs, blocks)
    assert total == 3  # a decode runs the decoder's mid block and its two up blocks
    lines, clock = [], FakeClock()
    progress = BlockProgress(total, lines.append, interval_s=1.0, clock=clock)
    handles = [b.register_forward_hook(progress) for b in blocks]
    with torch.no_grad():
        task.run(model, inputs)
    for handle in handles:
        handle.remove()
    payloads = [json.loads(line[len(PROGRESS_PREFIX):]) for line in lines]
    assert [p["done"] for p in payloads] == [1, 3]  # the first, then (in the interval) the last
    assert all(p["total"] == 3 and p["unit"] == "blocks" for p in payloads)


def _follow(tmp_path, lines_at, end_at, mode):
    """Drive follow_child_progress with a fake clock: ``lines_at`` maps a time to the lines written
    then."""
    log, clock, out = tmp_path / "baseline_child.log", FakeClock(), io.StringIO()
    log.write_text("")

    def poll():
        for at in [t for t in lines_at if t <= clock.now]:
            with open(log, "a") as handle:
                handle.write("".join(line + "\n" for line in lines_at.pop(at)))
        return ChildExit(0) if clock.now >= end_at else None

    options = ProgressOptions(mode=mode, stream=out, clock=clock)
    ended = follow_child_progress(poll, log, "reference (cpu float64)", options, clock.sleep)
    return ended, out.getvalue()


def _line(done, total):
    return PROGRESS_PREFIX + json.dumps({"done": done, "total": total, "unit": "blocks"})


def test_heartbeat_off_a_terminal_is_one_line_per_15_s_with_the_job_name_and_an_eta(tmp_path):
    job_name("tiny_flux2_decoder/float32")
    try:
        ended, text = _follow(tmp_path, {10.0: ["loading ...", _line(1, 8)], 40.0: [_line(3, 8)],
                                         50.0: ["partial"]}, 70.0, "log")
    finally:
        job_name(None)
    lines = text.splitlines()
    assert ended.code == 0 and 2 <= len(lines) <= 70 // 15 + 1
    prefix = "[tiny_flux2_decoder/float32] reference (cpu float64): "
    assert all(line.startswith(prefix) for line in lines)
    assert any("3/8 blocks" in line and "ETA" in line for line in lines)


def test_on_a_terminal_a_live_bar_is_drawn(tmp_path):
    ended, text = _follow(tmp_path, {1.0: [_line(2, 4)], 2.0: [_line(4, 4)]}, 3.0, "bar")
    assert ended.code == 0 and "reference (cpu float64)" in text and "blocks" in text


def test_a_child_without_progress_lines_still_gets_a_heartbeat(tmp_path):
    ended, text = _follow(tmp_path, {}, 31.0, "log")
    assert ended.code == 0 and len(text.splitlines()) == 2 and "reference (cpu float64): " in text


def test_the_child_reference_runs_unpatched_unless_a_patch_is_declared_for_it(cfg_tiny, tmp_path):
    """The record said "unpatched" while the child applied model.patches; now code, record and the
    cache's meta.json agree: only a `reference: true` entry applies in the reference process."""
    from omegaconf import OmegaConf, open_dict

    from ascendbench.baseline.store import BaselineStore

    from helpers import run_job

    device_only = {"name": "diffusers_attention_backend", "backend": "native", "devices": ["cpu"]}
    with open_dict(cfg_tiny):
        cfg_tiny.baseline.process = "child"
        cfg_tiny.model.patches = OmegaConf.create([device_only])
    record = run_job(cfg_tiny, tmp_path / "unpatched")
    assert record["status"] == "ok", record["error"]
    assert "runs the model's own (upstream) code" in record["patches"]["reference"][0]["skipped"]
    assert record["patches"]["device"][0]["name"] == "diffusers_attention_backend"
    meta = BaselineStore(cfg_tiny.baseline.cache_dir).read_meta(record["baseline"]["cache_key"])
    assert meta["patches"] == [] and meta["bounded"]["convolutions"] > 0
    child_log = (tmp_path / "unpatched" / "baseline_child.log").read_text()
    assert "patch diffusers_attention_backend applied" not in child_log

    with open_dict(cfg_tiny):
        cfg_tiny.model.patches = OmegaConf.create([{**device_only, "reference": True}])
        cfg_tiny.baseline.cache = False
    record = run_job(cfg_tiny, tmp_path / "declared")
    assert record["status"] == "ok", record["error"]
    assert record["patches"]["reference"][0]["name"] == "diffusers_attention_backend"
    meta = BaselineStore(cfg_tiny.baseline.cache_dir).read_meta(record["baseline"]["cache_key"])
    assert [p["name"] for p in meta["patches"]] == ["diffusers_attention_backend"]
