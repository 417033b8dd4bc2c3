"""Tasks: deterministic inputs from a preset and seed, and ``run(model, inputs) -> outputs``."""

from ascendbench.tasks.base import Task
from ascendbench.tasks.image_to_video import ImageToVideoTask
from ascendbench.tasks.inputs import cpu_randn, describe, tensor_sha256
from ascendbench.tasks.layer_forward import LayerForwardTask
from ascendbench.tasks.placement import move_inputs, place
from ascendbench.tasks.text_to_video import TextToVideoTask
from ascendbench.tasks.vae_decode import VaeDecodeTask
from ascendbench.tasks.video_decode import VideoDecodeTask

__all__ = ["ImageToVideoTask", "LayerForwardTask", "Task", "TextToVideoTask", "VaeDecodeTask", "VideoDecodeTask",
           "cpu_randn", "describe", "move_inputs", "place", "tensor_sha256"]
