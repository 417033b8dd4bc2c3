"""Task kinds are a config group (conf/model/task/): a model picks one by a defaults line, a variant
swaps it.

Rules that hold for every model, so a new model needs no edit here: the composed task's ``_target_``
    is its
kind's, no model file writes a task ``_target_`` of its own, and a fact the architecture holds
(``latent_channels``) is written once and follows the architecture.
"""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from ascendbench.config import config_dir, group_options

KINDS = config_dir() / "model" / "task"


def kind_target(kind: str) -> str:
    return OmegaConf.load(KINDS / f"{kind}.yaml")["_target_"]


@pytest.mark.parametrize("model", group_options("model"))
def test_every_model_picks_a_task_kind_and_runs_its_class(compose_job, model):
    cfg = compose_job([f"model={model}"], hydra=True)
    kind = cfg.hydra.runtime.choices["model/task"]
    assert kind is not None, (
        f"model={model} selects no task kind (add `- task: <kind>` to its defaults)")
    assert cfg.model.task._target_ == kind_target(kind)


def test_no_model_file_names_a_task_class():
    for path in (config_dir() / "model").glob("*.yaml"):
        task = OmegaConf.load(path).get("task") or {}
        assert "_target_" not in task, (
            f"{path.name}: the task class comes from its kind (conf/model/task/)")


def test_a_variant_swaps_its_task_kind_in_one_line(compose_job):
    t2v = compose_job(["model=tiny_ltx_t2v"], hydra=True)
    i2v = compose_job(["model=tiny_ltx_i2v"], hydra=True)
    assert (t2v.hydra.runtime.choices["model/task"], i2v.hydra.runtime.choices["model/task"]) == \
        ("text_to_video", "image_to_video")
    assert i2v.model.task.image is None and i2v.model.task.call_kwargs == t2v.model.task.call_kwargs


def test_the_command_line_swaps_the_task_kind(compose_job):
    cfg = compose_job(["model=tiny_ltx_t2v", "model/task=image_to_video"])
    assert cfg.model.task._target_ == "ascendbench.tasks.text_to_video.ImageToVideoTask"


@pytest.mark.parametrize("model",
                         ["tiny_flux2_decoder", "flux2_small_decoder", "tiny_ltx_video_vae"])
def test_latent_channels_follow_the_architecture(compose_job, model):
    cfg = compose_job([f"model={model}", "model.loader.architecture.latent_channels=6"])
    assert cfg.model.task.latent_channels == 6
