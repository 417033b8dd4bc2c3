"""The supported floor of torch and diffusers, checked at start-up, with planted old versions."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ascendbench import compat
from ascendbench.errors import UnsupportedVersionError

CURRENT = {"torch": "2.11.0+cu130", "diffusers": "0.42.1"}


def _lookup(**versions):
    table = {**CURRENT, **versions}
    return lambda name: table.get(name)


@pytest.mark.parametrize("found, old",
                         [("2.0.1+cpu", True), ("1.13.1", True), ("2.1.0a0+git7bcf7da", False),
                                        ("2.1.0", False), ("2.11.0+cu130", False),
                                        ("not-a-version", False)])
def test_older_than_compares_releases(found, old):
    assert compat.older_than(found, "2.1") is old


def test_a_torch_below_the_floor_is_one_paragraph_naming_found_floor_and_fix():
    with pytest.raises(UnsupportedVersionError) as caught:
        compat.require_supported(_lookup(torch="2.0.1"))
    message = str(caught.value)
    assert "torch >= 2.1" in message and "has torch 2.0.1" in message and sys.executable in message
    assert "torch_npu" in message and "make install-offline" in message and "\n" not in message
    assert caught.value.reason == "unsupported_version"


def test_missing_torch_and_old_diffusers_are_both_named(monkeypatch):
    monkeypatch.setattr(compat.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UnsupportedVersionError) as caught:
        compat.require_supported(_lookup(torch=None, diffusers="0.35.2"))
    first, second = str(caught.value).split("\n")
    assert "torch is not installed" in first and "has diffusers 0.35.2" in second


def test_supported_versions_and_an_unknown_source_build_pass():
    compat.require_supported(_lookup())
    # importable torch without metadata: version unknown, not judged
    compat.require_supported(_lookup(torch=None))


def test_the_cli_refuses_an_old_torch_before_composing_a_job(cli, monkeypatch):
    monkeypatch.setattr(compat, "installed_version", _lookup(torch="2.0.1"))
    result, job = cli("model=tiny_flux2_decoder", "device=cpu")
    assert result.returncode == compat.EXIT_UNSUPPORTED
    assert "error: ascendbench needs torch >= 2.1" in result.stderr and not job.exists()


def test_report_lists_floors_and_requirements_and_fails_on_a_floor(capsys):
    def requires():
        return ["torch>=2.1", "diffusers>=0.36", "imageio-ffmpeg", "pytest>=7; extra == 'dev'"]
    assert compat.report(_lookup(), requires) == 0
    out = capsys.readouterr().out
    assert "ok       torch >= 2.1 (floor): 2.11.0+cu130" in out
    assert "MISSING  imageio-ffmpeg: not installed" in out and "pytest" not in out
    assert compat.report(_lookup(torch="2.0.1"), requires) == compat.EXIT_UNSUPPORTED
    captured = capsys.readouterr()
    assert ("FAIL     torch >= 2.1 (floor): 2.0.1" in captured.out
            and "TOO OLD  torch>=2.1: 2.0.1" in captured.out)
    assert "error: ascendbench needs torch" in captured.err
    assert compat.report(_lookup(**{"imageio-ffmpeg": None}), requires) == 0  # degrades, said so


def test_report_fails_naming_each_requirement_a_job_would_miss(capsys):
    """An offline install that lacks a requirement ends non-zero naming it (not at the first job's
    bare ModuleNotFoundError)."""
    def requires():
        return ["torch>=2.1", "scikit-image", "pandas>=2", "transformers", "imageio-ffmpeg"]
    lookup = _lookup(**{"scikit-image": None, "pandas": "1.5.3", "imageio-ffmpeg": None,
                        "transformers": "5.0.0"})
    assert compat.report(lookup, requires) == 1
    err = capsys.readouterr().err
    assert "2 requirement(s) of ascendbench are not usable" in err
    assert "scikit-image (missing), pandas>=2 (too old)" in err and "imageio-ffmpeg" not in err
    assert "transformers" not in err and "--no-deps" in err
    assert (compat.main(["--help"]) == 0
            and "usage: python -m ascendbench.compat" in capsys.readouterr().out)


@pytest.mark.slow
def test_python_m_ascendbench_checks_before_importing_torch(tmp_path):
    """A dist-info of torch 2.0.1 first on the path: `python -m ascendbench` exits 2 with the
    paragraph."""
    fake = tmp_path / "site" / "torch-2.0.1.dist-info"
    fake.mkdir(parents=True)
    (fake / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.0.1\n")
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"),
                                          os.environ.get("PYTHONPATH", "")])}
    code = "import runpy; runpy.run_module('ascendbench', run_name='__main__')"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "has torch 2.0.1" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_ascendbench_script_checks_before_importing_torch(tmp_path):
    """The installed `ascendbench` console script (its entry point, loaded as pip's wrapper does)
    refuses torch 2.0.1 in one paragraph, exit 2, with torch never imported."""
    fake = tmp_path / "site" / "torch-2.0.1.dist-info"
    fake.mkdir(parents=True)
    (fake / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.0.1\n")
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"),
                                          os.environ.get("PYTHONPATH", "")])}
    code = ("import sys; from importlib.metadata import entry_points\n"
            "(script,) = [e for e in entry_points(group='console_scripts') if e.name == "
            "'ascendbench']\n"
            "try:\n    script.load()()\n"
            "except SystemExit as exc:\n    print('torch imported:', 'torch' in sys.modules); "
            "raise\n")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "has torch 2.0.1" in done.stderr and "Traceback" not in done.stderr
    assert "torch imported: False" in done.stdout


def test_installed_versions_are_read_once_a_process(monkeypatch):
    """Each job's record asks for a dozen versions; the metadata scan of sys.path (~1 ms each)
    runs once per distribution, a missing one included."""
    scans: list[str] = []
    real = compat.md.version

    def counted(name: str) -> str:
        scans.append(name)
        return real(name)

    monkeypatch.setattr(compat.md, "version", counted)
    compat.installed_version.cache_clear()
    try:
        first = compat.library_versions(("torch", "no-such-distribution"))
        again = compat.library_versions(("torch", "no-such-distribution"))
    finally:
        compat.installed_version.cache_clear()
    assert first == again and first["torch"] and first["no-such-distribution"] is None
    assert scans == ["torch", "no-such-distribution"]
