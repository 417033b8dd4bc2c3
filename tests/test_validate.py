"""``ascendbench.validate``: the shipped config tree is valid, and a broken one lists every problem
at once."""

from __future__ import annotations

import io
import sys
from contextlib import redirect_stdout

import pytest
from omegaconf import OmegaConf

from ascendbench import compat
from ascendbench.cli import main as cli_main
from ascendbench.config import config_dir
from ascendbench.config.targets import bind_problem
from ascendbench.config.validate import config_groups, main, validate


def test_shipped_config_tree_is_valid():
    report = validate()
    assert not report.problems, "\n".join(report.problems)
    groups = config_groups(config_dir())
    assert len(report.composed) == 1 + sum(len(options) for options in groups.values())
    assert report.skipped == [], "every task kind is selected by a model"
    assert any(t.endswith("ascendbench.models.loader.DiffusersLoader") for t in report.targets)


@pytest.fixture(scope="module")
def broken_run(tmp_path_factory) -> tuple[int, str]:
    """``python -m ascendbench.validate --config-dir`` (its exit code and output) on a folder of
    one's own options with planted faults of different kinds; validated once for the tests below."""
    root = tmp_path_factory.mktemp("broken") / "conf"
    planted = {
        "model/typo_key.yaml": "defaults:\n  - tiny_flux2_decoder\n  - _self_\nname: typo_key\n"
        "loader:\n  class_paht: diffusers.X\n",
        "metric/missing_class.yaml": "_target_: ascendbench.metrics.NoSuchEvaluator\nname: x\n",
        "preset/dangling.yaml": "name: dangling\nheight: ${preset.nope}\nwidth: 8\nnum_frames: 1\n"
        "batch_size: 1\nsteps: 1\nwarmup: 0\niters: 1\nmax_time_s: 1\n",
        "dtype/bad_yaml.yaml": "name: [unclosed\n",
        "model/unsafe.yaml": "defaults:\n  - tiny_flux2_decoder\n  - _self_\nname: unsafe\n"
        "allow_pickle: true\n",
        "model/unwired.yaml": "defaults:\n  - tiny_flux2_decoder\n  - _self_\nname: unwired\n"
        "loader:\n  allow_pickle: false\n",
        "model/task/orphan.yaml": "_target_: ascendbench.tasks.VaeDecodeTask\nspatial_compression: "
        "8\n",
        "preset/mini.yaml": "name: mini\n",  # a shipped name: never used
    }
    for name, text in planted.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["--config-dir", str(root)])
    return code, out.getvalue()


def test_every_planted_problem_is_listed_at_once(broken_run):
    code, text = broken_run
    assert code == 1
    assert "FAIL  model=typo_key: model.loader: keys" in text and "class_paht" in text
    assert (
        "FAIL  metric=missing_class: metric._target_='ascendbench.metrics.NoSuchEvaluator' "
        "cannot be imported" in text
    )
    assert "FAIL  preset=dangling: the config does not resolve" in text and "preset.nope" in text
    assert "FAIL  dtype=bad_yaml: does not compose" in text
    assert "FAIL  model=unsafe: model.allow_pickle=true is set by a shipped config" in text
    assert "FAIL  preset=mini: " in text and "the shipped preset/mini.yaml is found first" in text
    planted = {
        "model=typo_key",
        "metric=missing_class",
        "preset=dangling",
        "dtype=bad_yaml",
        "model=unsafe",
        "model=unwired",
        "preset=mini",
    }
    failing = [line for line in text.splitlines() if line.startswith("FAIL  ")]
    assert sorted(line.split(":")[0][6:] for line in failing) == sorted(planted), text
    assert "SKIP  model/task=orphan: no model selects it" in text


def test_bind_accepts_partial_and_rejects_missing_required():
    partial = OmegaConf.create(
        {
            "_target_": "ascendbench.tasks.vae_decode.VaeDecodeTask",
            "_partial_": True,
            "latent_channels": 4,
        }
    )
    assert bind_problem("model.task", partial) is None
    missing = OmegaConf.create(
        {"_target_": "ascendbench.tasks.vae_decode.VaeDecodeTask", "latent_channels": 4}
    )
    assert "spatial_compression" in bind_problem("model.task", missing)


def test_a_model_switch_its_loader_never_sees_is_reported(broken_run):
    problems = [
        line[6:] for line in broken_run[1].splitlines() if line.startswith("FAIL  model=unwired")
    ]
    assert problems == [
        "model=unwired: model.allow_pickle is set but model.loader does not "
        "receive it; add "
        "`allow_pickle: ${model.allow_pickle}` under model.loader so that "
        "`model.allow_pickle=...` "
        "takes effect"
    ]


def test_options_of_an_absent_extra_are_skipped_naming_the_extra(monkeypatch, capsys):
    """A plain install (no `ascendbench[search]`): the search options are SKIPs saying what to
    install, not FAILs from Hydra's "Could not find 'hydra/sweeper/optuna'"."""
    monkeypatch.setitem(compat.EXTRA_GROUPS, "search", "no_such_plugin.sweeper")
    assert main([]) == 0
    out = capsys.readouterr().out
    searches = config_groups(config_dir())["search"]
    assert searches and all(f"SKIP  search={option}: its extra is not installed (`pip install "
                            "'ascendbench[search]'`" in out for option in searches), out
    assert "FAIL" not in out


def test_a_sweep_needing_an_absent_extra_names_it_before_hydra_starts(monkeypatch, capsys):
    monkeypatch.setitem(compat.EXTRA_GROUPS, "search", "no_such_plugin.sweeper")
    monkeypatch.setattr(sys, "argv", ["ascendbench", "-m", "+search=tiny_cpu"])
    with pytest.raises(SystemExit) as exited:
        cli_main()
    assert "`+search=tiny_cpu` needs an optional extra" in str(exited.value.code)
    assert "pip install 'ascendbench[search]'" in str(exited.value.code)
