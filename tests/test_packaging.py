"""The package installs non-editable with its config: pkg://ascendbench.conf from any directory."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_every_subpackage_is_listed_in_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(project["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts)  # hydra_plugins: the launcher's entry
               for top in ("ascendbench", "hydra_plugins")
               for p in (ROOT / top).rglob("__init__.py")}
    assert on_disk - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert "ascendbench.conf" in listed
    conf_dirs = {".".join(("ascendbench.conf", *d.relative_to(ROOT / "conf").parts))
                 for d in (ROOT / "conf").rglob("*") if d.is_dir() and any(d.glob("*.yaml"))}
    assert conf_dirs - listed == set(), "each conf/ folder is a data package: add these to packages"
    conf_tree = {".".join(("ascendbench.conf", *d.relative_to(ROOT / "conf").parts))
                 for d in (ROOT / "conf").rglob("*") if d.is_dir() and d.name != "__pycache__"}
    assert listed - on_disk - conf_tree == {"ascendbench.conf"}, "a listed package is gone"


def test_wheel_build_prints_no_setuptools_warning(tmp_path):
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps",
                            "--no-build-isolation",
                            "-v", "-w", str(tmp_path / "dist")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    warnings = [line for line in (build.stdout + build.stderr).splitlines()
                if "Warning" in line
                and ("setuptools" in line or "absent from the `packages`" in line)]
    assert warnings == [], warnings[:5]


def test_wheel_ships_the_config_and_runs_from_another_directory(tmp_path):
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps",
                            "--no-build-isolation",
                            "-q", "-w", str(tmp_path / "dist")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    wheel = next((tmp_path / "dist").glob("ascendbench-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    on_disk = {f"ascendbench/conf/{p.relative_to(ROOT / 'conf')}"
               for p in (ROOT / "conf").rglob("*.yaml")}
    assert on_disk <= names, f"missing from the wheel: {sorted(on_disk - names)[:5]}"
    assert "hydra_plugins/ascendbench_launcher/__init__.py" in names  # Hydra scans it there

    target = tmp_path / "site"
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q",
                              "--target", str(target),
                              str(wheel)], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}
    run = subprocess.run([sys.executable, "-c",
                          "import ascendbench, runpy; print(ascendbench.__file__); "
                          "import sys; sys.argv=['ascendbench', '--help']; "
                          "runpy.run_module('ascendbench', run_name='__main__')"],
                         cwd=elsewhere, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(str(target)), "the installed copy, not the checkout, must be used"
    [models] = [line for line in run.stdout.splitlines() if line.startswith("model: ")]
    assert "flux2_small_decoder," in models and "device: auto, cpu, cuda, npu" in run.stdout


def _fake_python(tmp_path):
    """A stand-in for the host's python that prints the arguments it was called with."""
    script = tmp_path / "python"
    script.write_text('#!/bin/sh\necho "python $*"\n')
    script.chmod(0o755)
    return script


def test_install_offline_takes_no_index_and_never_a_torch_wheel(tmp_path):
    house = tmp_path / "wheels"
    house.mkdir()
    for name in ("torch-2.1.0-cp311-cp311-linux_aarch64.whl",
                 "torch_npu-2.1.0.post8-cp311-cp311-linux_aarch64.whl",
                 "torchvision-0.16.0-cp311-cp311-linux_aarch64.whl",
                 "diffusers-0.42.1-py3-none-any.whl",
                 "ascendbench-0.1.0-py3-none-any.whl"):
        (house / name).write_bytes(b"")
    done = subprocess.run(["make", "-s", "install-offline", f"WHEELHOUSE={house}",
                           f"PYTHON={_fake_python(tmp_path)}"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    install, check = done.stdout.strip().splitlines()
    assert (install.startswith("python -m pip install --no-index --find-links")
            and "--no-deps" in install)
    assert "diffusers-0.42.1" in install and "ascendbench-0.1.0" in install
    assert ("/torch-" not in install and "torch_npu-" not in install
            and "torchvision-" not in install)
    assert check == "python -m ascendbench.compat"


def test_install_offline_without_a_wheelhouse_says_how_to_make_one(tmp_path):
    done = subprocess.run(["make", "-s", "install-offline", f"WHEELHOUSE={tmp_path / 'none'}",
                           f"PYTHON={_fake_python(tmp_path)}"], cwd=ROOT, capture_output=True,
                           text=True)
    assert done.returncode != 0 and "make wheelhouse" in done.stdout


def test_the_wheelhouse_set_is_the_run_time_closure_without_the_hosts_torch():
    """`make wheelhouse` downloads what scripts/wheel_set.py prints: every run-time requirement
    (the ones an offline install was missing included), never torch or its CUDA wheels."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "wheel_set.py")],
                          capture_output=True, text=True, check=True)
    names = {line.split("==")[0] for line in done.stdout.split()}
    assert {"diffusers", "transformers", "scikit-image", "pandas", "scipy", "matplotlib",
            "hydra-core", "antlr4-python3-runtime", "safetensors", "lpips"} <= names
    assert not {n for n in names if n in ("torch", "torchvision", "torch-npu", "triton")
                or n.startswith("nvidia-")}
    assert not {"pytest", "ruff", "optuna", "mlflow"} & names  # extras stay out
