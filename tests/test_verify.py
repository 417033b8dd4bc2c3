"""``ascendbench.verify``: one PASS/WARN/FAIL line per check, never a crash or a hang on a CPU
host."""

from __future__ import annotations

import pytest

from ascendbench.verify import checks, versions
from ascendbench.verify.checks import Check, check_attention, check_devices, check_hub


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The real report of this host (one device probe in a child process), offline."""
    mp = pytest.MonkeyPatch()
    from huggingface_hub import constants

    mp.setattr(constants, "HF_HUB_OFFLINE", True)
    try:
        yield checks.run_checks(timeout_s=120, hub_timeout_s=2)
    finally:
        mp.undo()


def test_every_issue_item_has_a_line_with_a_status(report):
    names = [c.name for c in report]
    for expected in ("python", "torch", "diffusers", "transformers", "hydra-core", "torch_npu",
                     "CANN", "driver",
                     "device cpu", "attention", "lpips weights", "hub"):
        assert expected in names, names
    assert {c.status for c in report} <= {"PASS", "WARN", "FAIL"}
    assert all(c.detail for c in report)


def test_cpu_only_host_passes_with_warnings(report):
    by_name = {c.name: c for c in report}
    assert by_name["python"].status == by_name["torch"].status == "PASS"
    assert by_name["device cpu"].status == "PASS" and "GiB free" in by_name["device cpu"].detail
    assert (by_name["torch_npu"].status == "WARN"
            and "ascendbench[npu]" not in by_name["torch_npu"].detail
            and "torch_npu" in by_name["torch_npu"].detail)
    assert by_name["device npu"].status == "WARN"
    assert by_name["attention"].status == "PASS" and "native@cpu" in by_name["attention"].detail
    assert by_name["hub"].status == "PASS" and "offline" in by_name["hub"].detail
    lpips = by_name["lpips weights"]
    assert lpips.status == "PASS" or ("TORCH_HOME" in lpips.detail and "skipped" in lpips.detail)
    assert not [c for c in report if c.status == "FAIL"], checks.format_checks(report)


def test_required_device_absent_is_a_fail_and_exit_1(report, monkeypatch, capsys):
    probe = {"npu": {"count": 0, "why": "runtime not importable"},
             "cuda": {"count": 0, "why": "no device"},
             "devices": []}
    lines = check_devices(probe, require=["npu"])
    assert [c.status for c in lines if c.name == "device npu"] == ["FAIL"]
    monkeypatch.setattr(checks, "run_checks", lambda *a, **k: report + lines)
    assert checks.main(["--require", "npu"]) == 1
    assert "FAIL  device npu" in capsys.readouterr().out


def test_probe_timeout_is_reported_not_waited_for():
    result = checks.probe_devices(timeout_s=0.05)
    assert "did not finish within 0.05 s" in result["error"]


def test_torch_npu_checks_import_and_torch_pairing(monkeypatch):
    monkeypatch.setattr(checks, "installed_version",
                        {"torch_npu": "2.5.1.post3", "torch": "2.5.1"}.get)
    assert checks.check_torch_npu({"npu": {"importable": True}}).status == "PASS"
    broken = checks.check_torch_npu({"npu": {"importable": False,
                                      "error": "OSError: libascendcl.so: cannot open"}})
    assert broken.status == "FAIL" and "libascendcl.so" in broken.detail
    monkeypatch.setattr(checks, "installed_version", {"torch_npu": "2.1.0", "torch": "2.5.1"}.get)
    assert checks.check_torch_npu({"npu": {"importable": True}}).status == "FAIL"


def test_cann_and_driver_versions_from_install_files(monkeypatch, tmp_path):
    toolkit = tmp_path / "ascend-toolkit" / "latest" / "aarch64-linux"
    toolkit.mkdir(parents=True)
    info = "package_name=Ascend-cann-toolkit\nversion=8.1.RC1\n"
    (toolkit / "ascend_toolkit_install.info").write_text(info)
    (tmp_path / "driver").mkdir()
    driver = "Version=24.1.rc2\nascendhal_version=7.35.23\n"
    (tmp_path / "driver" / "version.info").write_text(driver)
    monkeypatch.setenv("ASCEND_HOME_PATH", str(tmp_path / "ascend-toolkit" / "latest"))
    monkeypatch.setattr(versions, "ASCEND_ROOT", tmp_path)
    version, source = versions.cann_version({})
    assert version == "8.1.RC1" and source.endswith("ascend_toolkit_install.info")
    assert versions.cann_version({"cann": "8.3.RC1"})[0] == "8.3.RC1"
    assert ("Ascend", "24.1.rc2") == versions.driver_version(1.0)[0][:2]


def test_unreachable_hub_warns_quickly(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    # closed local port: refused at once
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    check = check_hub(timeout_s=2)
    assert (check.status == "WARN" and "HF_ENDPOINT" in check.detail
            and "127.0.0.1:9" in check.detail)


def test_attention_native_failure_is_a_fail():
    bad = {"native": {"cpu": {"ok": False, "why": "RuntimeError: boom"}},
           "_native_math": {"cpu": {"ok": True, "why": "max diff 0"}}}
    assert check_attention({"attention": bad}).status == "FAIL"
    assert check_attention({}).status == "FAIL"


def test_a_crashing_check_becomes_a_fail_line():
    lines = checks._guarded("lpips weights", lambda: 1 / 0)
    assert lines == [Check("lpips weights", "FAIL",
                           "the check itself failed: ZeroDivisionError: division by zero")]


def test_ascend_dirs_check_names_a_missing_directory_and_fails_a_file(tmp_path, monkeypatch):
    from ascendbench.verify.checks import check_ascend_dirs

    for key in ("ASCEND_CACHE_PATH", "ASCEND_WORK_PATH", "ASCEND_PROCESS_LOG_PATH"):
        monkeypatch.delenv(key, raising=False)
    assert check_ascend_dirs().status == "PASS"
    monkeypatch.setenv("ASCEND_WORK_PATH", str(tmp_path / "nowhere"))
    check = check_ascend_dirs()
    assert (check.status == "WARN" and "ASCEND_WORK_PATH missing" in check.detail
            and "500001" in check.detail)
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("ASCEND_CACHE_PATH", str(tmp_path / "afile"))
    assert check_ascend_dirs().status == "FAIL"


@pytest.mark.parametrize("text, version", [
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
     "(dvs-builder)", "580.159.04"),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023",
     "535.104.05"),
    ("no version here", None),
])
def test_nvidia_driver_version_is_read_from_open_and_proprietary_modules(text, version):
    """The H200 run printed 'driver NVIDIA for': the open module's line has words before the
    version."""
    from ascendbench.verify.versions import nvidia_proc_version

    assert nvidia_proc_version(text) == version
