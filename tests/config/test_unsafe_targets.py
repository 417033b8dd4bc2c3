"""A config from a user's folder cannot make a job unpickle: a ``torch.load`` target with
``weights_only: false`` is refused at the configuration check, wherever it sits, in a dry run and in
a real run, before anything is built; and a dry run stops after a failed configuration check."""

from __future__ import annotations

import pickle

import pytest

from helpers import TINY_RUN, read_record, run_app

GLOBAL = "# @package _global_\n"
# key -> (the option file (in a user's conf dir) putting the planted node (`NODE`) there, content)
PLACES = {
    "model.loader.subfolder": ("evil/plant", GLOBAL + "model:\n  loader:\n    subfolder: NODE\n"),
    "model.loader": ("model/planted", "defaults: [{task: vae_decode}, _self_]\nname: planted\n"
                     "weights: random\nloader: NODE\ntask: {latent_channels: 4}\n"),
    "model.task.latent_channels": ("evil/plant",
                                   GLOBAL + "model:\n  task:\n    latent_channels: NODE\n"),
    "metric.evaluators.planted": ("evil/plant",
                                  GLOBAL + "metric:\n  evaluators:\n    planted: NODE\n"),
    "metric.clip.path": ("evil/plant", GLOBAL + "metric:\n  clip:\n    path: NODE\n"),
    "hydra.callbacks.planted": ("evil/plant",
                                GLOBAL + "hydra:\n  callbacks:\n    planted: NODE\n"),
}


class Payload:
    """Unpickling it creates ``marker`` (a stand-in for any code a pickle can run)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return open, (self.marker, "w")


def _planted(tmp_path, key: str):
    """A conf dir with an option putting an unpickling node at ``key``: the marker its payload
    would create, the overrides selecting it."""
    marker = tmp_path / "marker"
    evil = tmp_path / "evil.pt"
    evil.write_bytes(pickle.dumps(Payload(str(marker))))
    node = f"{{_target_: torch.load, f: '{evil}', weights_only: false}}"
    option, content = PLACES[key]
    path = tmp_path / "conf" / f"{option}.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(content.replace("NODE", node))
    select = ["model=planted"] if option == "model/planted" else [
        "model=tiny_flux2_decoder", "+evil=plant"]
    return marker, [f"hydra.searchpath=[file://{tmp_path / 'conf'}]", *select]


@pytest.mark.parametrize("dry_run", ["true", "false"])
@pytest.mark.parametrize("key", list(PLACES))
def test_planted_unpickling_target_is_refused_before_it_is_built(tmp_path, key, dry_run):
    marker, overrides = _planted(tmp_path, key)
    result = run_app([*TINY_RUN, *overrides,
                      f"baseline.cache_dir={tmp_path / 'cache'}", f"dry_run={dry_run}"], tmp_path)
    assert not marker.exists(), f"{key}: the planted pickle was unpickled"
    assert result.returncode != 0
    assert f"{key}._target_='torch.load' unpickles" in result.output, result.output[-3000:]


def test_dry_run_stops_after_a_failed_config_check(tmp_path):
    made = tmp_path / "made"
    result = run_app(["model=tiny_flux2_decoder", *TINY_RUN, "dry_run=true",
                      f"model.task.latent_channels={{_target_:os.makedirs,name:'{made}'}}"],
                     tmp_path)
    assert not made.exists(), "a node the config check refused was built"
    assert result.returncode != 0 and "latent_channels" in result.output
    assert read_record(result.job_dir)["plan"]["problems_by_stage"] == {"config": 1}


@pytest.mark.parametrize("key, said", [
    ("metric.evaluators.planted", "would build metric.evaluators.planted=os.makedirs"),
    # Hydra builds callbacks before any job: refused before it does (exit non-zero)
    ("hydra.callbacks.planted", "hydra.callbacks.planted=os.makedirs: a dry run builds only "
                                "ascendbench's own classes")])
def test_dry_run_names_a_target_not_ascendbench_s_and_does_not_build_it(tmp_path, key, said):
    made = tmp_path / "made"
    result = run_app(["model=tiny_flux2_decoder", *TINY_RUN, "dry_run=true",
                      f"+{key}={{_target_:os.makedirs,name:'{made}'}}"], tmp_path)
    assert not made.exists(), "the dry run built a class of the config's"
    assert said in result.output
    assert result.returncode != 0 or not key.startswith("hydra.")


def test_aliases_positional_arguments_and_interpolations_do_not_hide_a_loader_of_pickles():
    from omegaconf import OmegaConf

    from ascendbench.config.targets import target_problems

    cfg = OmegaConf.create({
        "model": {"allow_pickle": False,
                  "a": {"_target_": "torch.serialization.load", "f": "x", "weights_only": False}},
        "b": {"_target_": "numpy.load", "_args_": ["x", None, True]},
        "c": "${oc.create:'{_target_: pickle.loads, data: x}'}",
        "safe": [{"_target_": "torch.load", "f": "x", "weights_only": True},
                 {"_target_": "numpy.load", "file": "x"}]})
    assert [p.split("._target_")[0] for p in target_problems(cfg)[0]] == ["model.a", "b", "c"]
    cfg.model.allow_pickle = True  # weights the user trusts: under model only
    assert [p.split("._target_")[0] for p in target_problems(cfg)[0]] == ["b", "c"]
