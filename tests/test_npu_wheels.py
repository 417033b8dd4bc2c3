"""The torch_npu wheel for a host's torch and CANN (Ascend/pytorch's own version table and the
wheels' pins)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ascendbench import npu_wheels
from ascendbench.npu_wheels import WHEELS, advice, cann_release, torch_release, wheels_for


@pytest.mark.parametrize("torch_version, cann, wheel", [
    ("2.9.0+cpu", "8.5.0", "2.9.0"),
    ("2.9.0", "9.0.0.beta1", "2.9.0.post2"),
    ("2.9.0a0+git4f2c", "CANN 9.1.0", "2.9.0.post6"),
    ("2.1.0", "8.3.rc1.alpha002", "2.1.0.post17"),
    ("2.5.1", "8.1.RC1", "2.5.1"),
])
def test_torch_and_cann_name_one_wheel(torch_version, cann, wheel):
    assert [w.torch_npu for w in wheels_for(torch_version, cann)] == [wheel]


def test_the_torch_version_alone_does_not_name_the_wheel():
    assert [w.torch_npu for w in wheels_for("2.9.0")] == ["2.9.0.post6", "2.9.0.post2", "2.9.0"]
    status, text = advice("2.9.0", None, None)
    assert (status == "WARN" and "CANN unknown" in text
            and "torch_npu==2.9.0.post2 (CANN 9.0.0)" in text)


def test_every_wheel_pins_its_own_torch_release():
    for wheel in WHEELS:
        assert torch_release(wheel.torch_npu) == wheel.torch, wheel
    assert cann_release("CANN 8.3.RC1") == "8.3.RC1"


def test_verify_passes_the_right_wheel_and_fails_a_wheel_for_another_cann():
    assert advice("2.9.0+cpu", "9.0.0", "2.9.0.post2")[0] == "PASS"
    status, text = advice("2.9.0+cpu", "9.0.0", "2.9.0")  # the CANN 8.5 build on a CANN 9.0 host
    assert status == "FAIL" and "torch_npu==2.9.0.post2" in text
    assert advice("2.14.1", None, None)[0] == "WARN", "no wheel pins torch 2.14.1"


def test_the_make_install_spec_runs_as_a_plain_script():
    script = Path(npu_wheels.__file__)
    done = subprocess.run([sys.executable, str(script), "--spec", "--torch", "2.8.0", "--cann",
                           "8.5.0"],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "torch_npu==2.8.0.post2")
    done = subprocess.run([sys.executable, str(script), "--spec", "--torch", "2.8.0", "--cann",
                           "7.0.0"],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode == 1 and done.stdout == ""
            and "no torch_npu release pins torch 2.8.0" in done.stderr)
