"""The stages of a job, in order (:data:`STAGES`); each has ``plan(job)`` (``dry_run=true``) and
``run(job)``."""

from ascendbench.job.stages.artifacts import ArtifactsStage
from ascendbench.job.stages.base import Stage
from ascendbench.job.stages.compare import CompareStage
from ascendbench.job.stages.device_run import DeviceRunStage
from ascendbench.job.stages.evaluate import EvaluateStage
from ascendbench.job.stages.load import InputsStage, LoadStage
from ascendbench.job.stages.reference import ReferenceStage
from ascendbench.job.stages.replay_reference import ReplayReferenceStage
from ascendbench.job.stages.setup import ConfigStage, DeviceStage

STAGES: tuple[Stage, ...] = (ConfigStage(), DeviceStage(), LoadStage(), InputsStage(),
                             ReferenceStage(), DeviceRunStage(), EvaluateStage(),
                             ReplayReferenceStage(), CompareStage(), ArtifactsStage())
