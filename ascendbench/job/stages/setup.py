"""The first stages: the config's cross-field rules, then the device and the job's precision."""

from __future__ import annotations

import logging
from typing import Any

import torch
from omegaconf import OmegaConf

from ascendbench.compare import msprobe
from ascendbench.config.rules import check_config
from ascendbench.config.targets import build
from ascendbench.devices.cards import card_refusal
from ascendbench.job.job import Job
from ascendbench.job.stages.base import Stage
from ascendbench.metrics.clip import check_clip_path
from ascendbench.precision import Precision

log = logging.getLogger(__name__)

HALF_ON_CPU = (
    "dtype={dtype} on cpu: half-precision convolutions on CPUs without AVX512-BF16/AMX run about "
    "170x slower than float32 (measured on a 2-core AVX2 host: one 384-channel 3x3 conv at 32x32 "
    "took 22 ms in float32, 3.8 s in bfloat16, 4.3 s in float16); use a tiny model or "
    "dtype=float32 on CPU"
)


class ConfigStage(Stage):
    """Rules the config schemas cannot express (``max_iters >= min_iters``...); the same check in a
    dry run and a real run."""

    name, label = "config", "the configuration check"

    def plan(self, job: Job) -> dict[str, Any]:
        """Every config problem is a plan problem."""
        job.attempt("config", lambda: self.run(job))
        return {}

    def run(self, job: Job) -> dict[str, Any]:
        """Raise one :class:`~ascendbench.errors.ConfigError` listing every problem."""
        check_config(job.cfg)
        if job.cfg.compare.get("msprobe"):  # before the reference and the device run
            msprobe.require()
        clip = job.cfg.metric.get("clip") or {}
        if clip.get("path"):  # before the device run, not after it
            check_clip_path(str(clip["path"]))
        return {}


class DeviceStage(Stage):
    """The device adapter (``device=auto`` resolved) and the job's precision."""

    name, label = "device", "the device setup"

    def plan(self, job: Job) -> dict[str, Any]:
        """The same as the run (choosing a device loads no model), plus the plan's ``job`` line."""
        section = self.run(job)
        job.add_plan({"job": {"device": job.adapter.name, "device_name": job.adapter.device_name(),
                              "dtype": job.precision.name}})
        return section

    def run(self, job: Job) -> dict[str, Any]:
        """Build the adapter and the precision; a job the card pool gave no card fails here."""
        if (refusal := card_refusal()) is not None:
            raise refusal
        cfg = job.cfg
        # plain dicts and lists: rebuilding the peak table as DictConfig costs ~10 ms a job
        job.adapter = build(cfg.device, "device", _convert_="all")
        job.precision = Precision.build(cfg, job.adapter.name)
        if job.adapter.name == "cpu" and job.precision.dtype != torch.float32:
            log.warning(HALF_ON_CPU.format(dtype=job.precision.name))
            job.warn(HALF_ON_CPU.format(dtype=job.precision.name))
        job.env["device"] = job.adapter.info()
        fields = {"model": cfg.model.name, "task": OmegaConf.select(cfg, "model.task._target_"),
                  "device": job.adapter.name, "device_requested": cfg.device.name,
                  "dtype": job.precision.name, "dtype_requested": job.precision.requested,
                  "preset": cfg.preset.name, "seed": int(cfg.seed),
                  "batch_size": int(cfg.preset.batch_size), "height": int(cfg.preset.height),
                  "width": int(cfg.preset.width)}
        return {"job": fields, "env": {"device": job.env["device"]}}
