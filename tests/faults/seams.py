"""Fault seams for tests/faults: the real code paths with exactly one injected fault each.

Each class is built by ``_target_`` from ``tests/faults/conf`` (added with ``hydra.searchpath``), so
a job reaches it exactly as it reaches the shipped adapters and tasks.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Mapping

import torch

from ascendbench.devices.adapter import DeviceAdapter
from ascendbench.tasks.vae_decode import VaeDecodeTask

OOM_MESSAGE = (
    "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.15 GiB "
    "of which 1.02 GiB is free. (raised by tests/faults/seams.py)"
)


class OomOnRunAdapter(DeviceAdapter):
    """A CPU adapter whose device run fails like an exhausted accelerator: the real
    ``torch.OutOfMemoryError``."""

    def synchronize(self) -> None:
        raise torch.OutOfMemoryError(OOM_MESSAGE)


class NanOnDeviceDecode(VaeDecodeTask):
    """VAE decode whose device run (float32; the reference runs in float64) yields one NaN and one
    Inf."""

    NAN_AT = (0, 1, 2, 3)
    INF_AT = (0, 2, 5, 7)

    def run(
        self, model: torch.nn.Module, inputs: Mapping[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        outputs = super().run(model, inputs)
        image = outputs[self.output_name]
        if image.dtype == torch.float64:
            return outputs
        image = image.clone()  # outside inference mode: a normal tensor we may write into
        image[self.NAN_AT] = float("nan")
        image[self.INF_AT] = float("inf")
        return {**outputs, self.output_name: image}


class SlowDecode(VaeDecodeTask):
    """VAE decode that pauses in one of its runs, so a test can interrupt or race a job at a known
    point.

    Args:
        pause_s: seconds to sleep.
        pause_in: ``device`` (the float32 device run) or ``reference`` (the float64 CPU reference).
        pause_seed: pause only in the job with this seed (``None``: every job).
        marker: file created when the pause starts, holding the process id; with ``once`` a job
            pauses only if it does not exist.
        once: pause only the first time (the rerun after a kill goes through).
        release: end the pause as soon as this file exists (``pause_s`` stays the upper bound).
        in_finalizer: pause inside an object's ``__del__``, as when a signal arrives while the
            collector runs a finalizer (Python prints and drops what a finalizer raises).
        cleanup_s: seconds the pause takes to end when interrupted (a device sync, memory freed).
        cleanup_seed: only the job with this seed cleans up that long (``None``: every job).
        count_file: one line is appended to it per run of ``pause_in`` (how many times it was
            computed).
    """

    def __init__(
        self,
        latent_channels: int,
        spatial_compression: int,
        output_name: str = "image",
        pause_s: float = 0.0,
        pause_in: str = "device",
        pause_seed: int | None = None,
        marker: str | None = None,
        once: bool = False,
        count_file: str | None = None,
        release: str | None = None,
        in_finalizer: bool = False,
        cleanup_s: float = 0.0,
        cleanup_seed: int | None = None,
    ) -> None:
        super().__init__(latent_channels, spatial_compression, output_name)
        self.pause_s, self.pause_in, self.pause_seed = float(pause_s), pause_in, pause_seed
        self.marker, self.once, self.count_file, self.release = (
            marker,
            bool(once),
            count_file,
            release,
        )
        self.seed: int | None = None
        self.in_finalizer, self.interrupted = bool(in_finalizer), False
        self.cleanup_s, self.cleanup_seed = float(cleanup_s), cleanup_seed

    def make_inputs(self, preset: Mapping[str, Any], seed: int) -> dict[str, torch.Tensor]:
        self.seed = int(seed)
        return super().make_inputs(preset, seed)

    def run(
        self, model: torch.nn.Module, inputs: Mapping[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        is_reference = inputs["latent"].dtype == torch.float64
        real = not inputs["latent"].is_meta  # the memory estimate runs the task on meta tensors
        if real and is_reference == (self.pause_in == "reference"):
            if self.count_file:
                with open(self.count_file, "a") as handle:
                    handle.write(f"{os.getpid()}\n")
            if self.in_finalizer:
                _PausesWhenDropped(self._maybe_pause)  # dropped at once: its __del__ pauses
                if self.interrupted:  # the call goes on in plain code, as a model's would: the
                    time.sleep(2.0)  # interrupt Python dropped in the finalizer lands here
            else:
                self._maybe_pause()
        return super().run(model, inputs)

    def _maybe_pause(self) -> None:
        if self.pause_seed is not None and self.seed != int(self.pause_seed):
            return
        if self.marker:
            if self.once and Path(self.marker).exists():
                return
            written = Path(f"{self.marker}.{os.getpid()}")
            written.write_text(str(os.getpid()))
            os.replace(written, self.marker)  # whoever sees the marker reads the whole pid
        deadline, release = time.monotonic() + self.pause_s, self.release and Path(self.release)
        try:
            while time.monotonic() < deadline and not (release and release.exists()):
                time.sleep(0.05)
        except KeyboardInterrupt:
            self.interrupted = True
            raise
        finally:
            if self.cleanup_seed is None or self.seed == int(self.cleanup_seed):
                time.sleep(self.cleanup_s)


class _PausesWhenDropped:
    """An object whose finalizer (``__del__``) runs ``pause``."""

    def __init__(self, pause: Any) -> None:
        self.pause = pause

    def __del__(self) -> None:
        self.pause()


# --- Full disk (tests/faults/test_job_dir_faults.py) ----------------------------------------------

NO_SPACE = "No space left on device (raised by tests/faults/seams.py)"


def safetensors_disk_full(tensors: Any, filename: str, metadata: Any = None) -> None:
    """``safetensors.torch.save_file`` on a full disk: safetensors' own error, whose message names
    no file."""
    from safetensors import SafetensorError

    Path(filename).write_bytes(b"\0" * 8)  # a partial file, as a real full disk leaves
    raise SafetensorError(
        "Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "
        '"No space left on device" })'
    )


class DiskFullAfter:
    """A replacement for ``os.fsync`` that succeeds ``allowed`` times, then fails with ENOSPC: the
    disk fills up while the job runs (the record was written when the job started, the later writes
    fail)."""

    def __init__(self, allowed: int) -> None:
        self.allowed, self.calls, self.real = int(allowed), 0, os.fsync

    def __call__(self, fd: int) -> None:
        self.calls += 1
        if self.calls > self.allowed:
            import errno

            raise OSError(errno.ENOSPC, NO_SPACE)
        self.real(fd)
