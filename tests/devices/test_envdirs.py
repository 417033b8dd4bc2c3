"""Ascend *_PATH directories exist before torch_npu is imported (devices/envdirs.py)."""

from __future__ import annotations

import os

import pytest

from ascendbench.devices import runtime
from ascendbench.devices.adapter import DeviceAdapter
from ascendbench.devices.envdirs import DIRECTORY_ENV, ensure_env_dirs, env_dir_status
from ascendbench.errors import ConfigError

from helpers import TINY_RUN, read_record


@pytest.fixture
def clean_ascend_env(monkeypatch):
    for key in DIRECTORY_ENV:
        monkeypatch.delenv(key, raising=False)


def test_missing_directories_are_created_and_existing_ones_kept(tmp_path):
    environ = {"ASCEND_CACHE_PATH": str(tmp_path / "a" / "cache"),
               "ASCEND_WORK_PATH": str(tmp_path)}
    done = ensure_env_dirs(environ=environ)
    assert done == {"ASCEND_CACHE_PATH": f"created: {tmp_path / 'a' / 'cache'}",
                    "ASCEND_WORK_PATH": f"exists: {tmp_path}"}
    assert (tmp_path / "a" / "cache").is_dir()
    assert env_dir_status(environ=environ)["ASCEND_PROCESS_LOG_PATH"] == "unset"


def test_a_file_or_an_uncreatable_directory_is_refused_naming_the_key(tmp_path):
    afile = tmp_path / "plog"
    afile.write_text("")
    with pytest.raises(ConfigError, match=r"ASCEND_PROCESS_LOG_PATH=.*it is a file.*500001"):
        ensure_env_dirs(environ={"ASCEND_PROCESS_LOG_PATH": str(afile)})
    with pytest.raises(ConfigError, match=r"ASCEND_CACHE_PATH=.*cannot be created"):
        ensure_env_dirs(environ={"ASCEND_CACHE_PATH": str(afile / "below_a_file")})


def _runtime_that_sees(path, seen):
    """A fake torch_npu import that records whether ``path`` exists at import time, then reports no
    NPU."""

    def load():
        seen.append(path.is_dir())
        raise ImportError("fake torch_npu: no CANN here")

    return runtime.RuntimeSpec(load, "fake torch_npu", "no device")


def test_the_adapter_creates_them_before_the_npu_runtime_loads(tmp_path, monkeypatch,
                                                               clean_ascend_env):
    target, seen = tmp_path / "ascend" / "cache", []
    monkeypatch.setitem(runtime.RUNTIMES, "npu", _runtime_that_sees(target, seen))
    with pytest.raises(Exception, match="device=npu is not available"):
        DeviceAdapter("npu", env={"ASCEND_CACHE_PATH": str(target)})
    assert seen == [True], "the directory existed when the runtime was imported"
    assert os.environ["ASCEND_CACHE_PATH"] == str(target)


def test_cpu_and_cuda_leave_the_variables_alone(tmp_path, monkeypatch, clean_ascend_env):
    monkeypatch.setenv("ASCEND_WORK_PATH", str(tmp_path / "never"))
    assert DeviceAdapter("cpu").env_dirs == {}
    assert not (tmp_path / "never").exists()


def test_a_job_with_a_missing_cache_path_creates_it_first(cli, tmp_path, monkeypatch,
                                                          clean_ascend_env):
    target, seen = tmp_path / "missing" / "cache", []
    monkeypatch.setitem(runtime.RUNTIMES, "npu", _runtime_that_sees(target, seen))
    result, job = cli("model=tiny_flux2_decoder", *TINY_RUN[:-1], "device=npu",
                      f"+device.env.ASCEND_CACHE_PATH={target}")
    assert seen == [True] and target.is_dir()
    record = read_record(job)
    assert result.returncode == 1 and record["error"]["reason"] == "device_unavailable"


def test_a_job_whose_path_is_a_file_fails_with_the_key_named(cli, tmp_path, monkeypatch,
                                                             clean_ascend_env):
    afile = tmp_path / "cachefile"
    afile.write_text("")
    result, job = cli("model=tiny_flux2_decoder", *TINY_RUN[:-1], "device=npu",
                      f"+device.env.ASCEND_CACHE_PATH={afile}")
    output = result.stdout + result.stderr
    assert result.returncode == 1 and "ASCEND_CACHE_PATH" in output and "Traceback" not in output
    assert read_record(job)["status"] == "failed"
