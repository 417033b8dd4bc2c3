"""``ascendbench.job.failures``: reasons, console paragraph, tracebacks kept, memory given back."""

from __future__ import annotations

import gc
import logging
import weakref

import pytest
import torch
from omegaconf import OmegaConf

from ascendbench.errors import ConfigError, DeviceOutOfMemoryError, WeightsNotFoundError
from ascendbench.job.failures import (
    CONSOLE_LIMIT,
    classify,
    console_paragraph,
    interrupted,
    log_traceback,
    release_memory,
)


def measure(exc: BaseException) -> None:  # a frame the traceback log must show
    raise exc


def _raised(exc: BaseException) -> BaseException:
    try:
        measure(exc)
    except BaseException as caught:  # noqa: BLE001 - the test inspects it
        return caught
    raise AssertionError("not raised")


def test_torch_out_of_memory_becomes_oom_with_device_and_stage():
    original = _raised(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 "
                                              "GiB\nmore lines"))
    error, reason = classify(original, "npu", "the device run")
    assert reason == "oom" and isinstance(error,
                                          DeviceOutOfMemoryError) and error.__cause__ is original
    message = str(error)
    assert message.startswith("out of memory on npu during the device run")
    assert "Tried to allocate 2.00 GiB" in message and "more lines" not in message
    assert "preset.batch_size" in message and "PYTORCH_NPU_ALLOC_CONF" in message


@pytest.mark.parametrize("exc",
                         [RuntimeError("[enforce fail at alloc_cpu.cpp:121] DefaultCPUAllocator: "
                                       "can't "
                                              "allocate memory: you tried to allocate 81604378624 "
                                              "bytes."),
                                 MemoryError()])
def test_host_allocation_failures_are_oom_too(exc):
    assert classify(_raised(exc), "cpu")[1] == "oom"


def test_own_errors_keep_their_reason_and_others_are_unexpected():
    own = WeightsNotFoundError("no weights")
    assert classify(own) == (own, "weights_not_found")
    other = ValueError("boom")
    assert classify(other) == (other, "unexpected")


def test_broken_interpolation_is_a_config_error():
    cfg = OmegaConf.create({"a": "${nope}"})
    try:
        OmegaConf.to_container(cfg, resolve=True)
    except Exception as exc:  # InterpolationKeyError
        error, reason = classify(exc)
    assert reason == "config" and isinstance(error, ConfigError) and "nope" in str(error)


def test_console_paragraph_is_one_short_paragraph():
    long = RuntimeError("line one\n\n   line two " + "x" * 5000)
    text = console_paragraph(long)
    assert "\n" not in text and text.startswith("line one line two") and text.endswith("[...]")
    assert len(text) == CONSOLE_LIMIT + len(" [...]")
    own = ConfigError("exactly as written")
    assert console_paragraph(own) == "exactly as written"


def test_interrupted_says_where_and_how_to_go_on():
    message = str(interrupted(_raised(KeyboardInterrupt()), "the CPU reference"))
    assert "during the CPU reference" in message and "run the same command again" in message


def test_the_stage_the_job_names_is_the_one_said():
    error, reason = classify(_raised(torch.OutOfMemoryError("out")), "cuda", "the layer comparison")
    assert reason == "oom" and "on cuda during the layer comparison" in str(error)


def test_traceback_goes_to_a_file_even_without_a_job_log(tmp_path, monkeypatch):
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers",
                        [h for h in root.handlers if not isinstance(h, logging.FileHandler)])
    path = log_traceback(_raised(ValueError("kept")), tmp_path)
    assert path == tmp_path / "traceback.log"
    text = path.read_text()
    assert "Traceback" in text and "measure" in text and "ValueError: kept" in text


def test_traceback_goes_to_the_job_log_when_there_is_one(tmp_path):
    handler = logging.FileHandler(tmp_path / "ascendbench.log")
    handler.setLevel(logging.DEBUG)
    logger = logging.getLogger("ascendbench")
    logger.addHandler(handler)
    previous = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        path = log_traceback(_raised(ValueError("in the log")), tmp_path)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
        handler.close()
    assert path == tmp_path / "ascendbench.log" and "ValueError: in the log" in path.read_text()


def test_release_memory_frees_what_a_failed_job_left_in_its_traceback():
    def job() -> None:
        activations = torch.empty(4 << 20)  # held by the frame the traceback keeps
        probe.append(weakref.ref(activations))
        raise torch.OutOfMemoryError("out of memory")

    probe: list = []
    try:
        job()
    except torch.OutOfMemoryError as exc:
        error, _ = classify(exc, "cpu")
    assert probe[0]() is not None, "the wrapped error's cause still holds the frame"
    del error
    release_memory()
    gc.collect()
    assert probe[0]() is None
