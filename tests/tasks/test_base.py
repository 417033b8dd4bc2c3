"""The task interface declared once: every configured task inherits it, and its defaults behave."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra.utils import get_class
from omegaconf import OmegaConf

from ascendbench.bench.phases import PhaseTimer
from ascendbench.tasks.base import Task
from ascendbench.tasks.checks import CheckContext
from ascendbench.tasks.inputs import place
from ascendbench.tasks.vae_decode import VaeDecodeTask

KINDS = Path(__file__).resolve().parents[2] / "conf" / "model" / "task"


def _task_targets() -> set[str]:
    """The class of every task kind (conf/model/task/*.yaml), where a task's class is named."""
    return {OmegaConf.load(path)["_target_"] for path in KINDS.glob("*.yaml")}


def test_the_task_kinds_are_found():
    assert len(_task_targets()) >= 6


@pytest.mark.parametrize("target", sorted(_task_targets()))
def test_every_configured_task_is_a_task(target):
    assert issubclass(get_class(target), Task)


def test_the_base_declares_the_interface_and_cannot_be_built_half_done():
    with pytest.raises(TypeError, match="abstract"):
        Task()

    class NoRun(Task):
        def make_inputs(self, preset, seed):
            return {}

    with pytest.raises(TypeError, match="abstract"):
        NoRun()


def test_defaults_place_a_module_and_report_no_phases_and_no_checks():
    task = VaeDecodeTask(latent_channels=4, spatial_compression=8)
    module = torch.nn.Linear(2, 2)
    assert place(task, module, "cpu", torch.float64) is module
    assert module.weight.dtype == torch.float64
    assert task.attach_phase_timer(module, PhaseTimer()) is False
    ctx = CheckContext(module, torch.device("cpu"), torch.float32, {}, {}, {})
    assert task.checks(ctx) == {}
    assert (task.video_layout, task.value_range, tuple(task.video_frames), task.video_fps) == \
        ("BCTHW", (-1.0, 1.0), ("first", "middle", "last"), 24)


def test_items_per_call_defaults_to_one_call():
    class Echo(Task):
        def make_inputs(self, preset, seed):
            return {"x": torch.zeros(3)}

        def run(self, model, inputs):
            return dict(inputs)

    task = Echo()
    assert task.items_per_call(task.make_inputs({}, 0)) == 1 and task.unit == "calls"
    assert task.output_kind is None
