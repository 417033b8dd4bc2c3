"""A sweep job's config is composed once (the batch check's composition goes to the launch) from YAML files
parsed once per process (re-parsed when they change), jobs choosing the same config groups share a defaults
list and merge, and the jobs' configs and ``.hydra`` files are what plain Hydra makes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import hydra
import pytest
from hydra import initialize_config_dir, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.plugins.sweeper import Sweeper
from hydra.types import RunMode
from omegaconf import OmegaConf

from ascendbench.config import hydra_compose


def _write_conf(root: Path, size: int = 3) -> Path:
    conf = root / "conf"
    (conf / "shape").mkdir(parents=True, exist_ok=True)
    (conf / "config.yaml").write_text("defaults:\n  - shape: square\n  - _self_\nseed: 1\n")
    (conf / "shape" / "square.yaml").write_text(f"side: {size}\n")
    (conf / "shape" / "wide.yaml").write_text("side: 5\nratio: 2\n")
    return conf


@pytest.fixture
def loader(tmp_path):
    """Hydra's config loader on a small config tree, with the wrappers installed."""
    assert hydra_compose.faster_composition(), f"Hydra {hydra.__version__} is the one these wrappers are for"
    hydra_compose.forget()
    conf = _write_conf(tmp_path)
    with initialize_config_dir(str(conf), version_base="1.3"):
        yield GlobalHydra.instance().config_loader(), conf
    hydra_compose.forget()


def _check(loader, master, batch):
    """What a sweeper does before launching ``batch``: Hydra's own check, on a stand-in sweeper object."""
    Sweeper.validate_batch_is_legal(SimpleNamespace(hydra_context=SimpleNamespace(config_loader=loader),
                                                    config=master), batch)


def test_the_checked_composition_goes_to_its_launch_once(loader):
    loader, _ = loader
    master = loader.load_configuration("config", [], run_mode=RunMode.MULTIRUN)
    _check(loader, master, [["seed=2"], ["shape=wide"]])
    assert hydra_compose.checked_compositions() == 2
    launched = loader.load_sweep_config(master, ["shape=wide"])
    assert hydra_compose.checked_compositions() == 1, "handed out once"
    fresh = loader.load_sweep_config(master, ["shape=wide"])  # none kept any more: composed again
    assert fresh is not launched
    assert OmegaConf.to_yaml(fresh) == OmegaConf.to_yaml(launched), "the same config as a composition now"
    assert launched.shape.ratio == 2 and launched.hydra.overrides.task == ["shape=wide"]


def test_another_master_config_or_overrides_compose_afresh(loader):
    loader, _ = loader
    master = loader.load_configuration("config", [], run_mode=RunMode.MULTIRUN)
    _check(loader, master, [["seed=2"]])
    other = loader.load_configuration("config", [], run_mode=RunMode.MULTIRUN)
    assert loader.load_sweep_config(other, ["seed=2"]).seed == 2
    assert loader.load_sweep_config(master, ["seed=3"]).seed == 3
    assert hydra_compose.checked_compositions() == 1, "neither took the check's config"
    _check(loader, master, [["seed=4"]])
    assert hydra_compose.checked_compositions() == 1, "a new batch drops what an earlier one kept"


def test_a_file_is_parsed_once_and_again_when_it_changes(loader, monkeypatch):
    loader, conf = loader
    parsed: list[str] = []
    load = OmegaConf.load
    monkeypatch.setattr(OmegaConf, "load", lambda f: parsed.append(getattr(f, "name", str(f))) or load(f))
    master = loader.load_configuration("config", [], run_mode=RunMode.MULTIRUN)
    first = len(parsed)
    assert first >= 2 and loader.load_sweep_config(master, []).shape.side == 3
    assert len(parsed) == first, "nothing parsed twice"
    (conf / "shape" / "square.yaml").write_text("side: 33\n")
    os.utime(conf / "shape" / "square.yaml", ns=(1, 1))  # a changed stamp even on a coarse clock
    assert loader.load_sweep_config(master, []).shape.side == 33, "the edited file is read again"
    assert [p for p in parsed[first:] if p.endswith("square.yaml")], parsed[first:]


def test_what_hydra_changes_in_a_loaded_file_stays_in_that_composition(loader):
    loader, _ = loader
    source = next(s for s in loader.repository.get_sources() if s.scheme() == "file")
    loaded = source.load_config("shape/square")
    loaded.config.side = 99
    assert source.load_config("shape/square").config.side == 3


APP = textwrap.dedent("""
    import sys
    import hydra
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from ascendbench.config.hydra_compose import faster_composition

    if sys.argv.pop(1) == "fast":
        faster_composition()
    original, compositions = ConfigLoaderImpl.load_configuration, []
    def counted(*args, **kwargs):
        compositions.append(1)
        return original(*args, **kwargs)
    ConfigLoaderImpl.load_configuration = counted

    @hydra.main(version_base="1.3", config_path="conf", config_name="config")
    def app(cfg):
        print("job", cfg.seed, cfg.shape.side)

    try:
        app()
    finally:
        print("compositions", len(compositions))
""")


def test_a_real_multirun_composes_each_job_once_and_writes_the_same_files(tmp_path):
    _write_conf(tmp_path)
    (tmp_path / "app.py").write_text(APP)
    runs = {}
    for mode in ("plain", "fast"):
        out = subprocess.run([sys.executable, "app.py", mode, "-m", "seed=1,2", "shape=square,wide",
                              f"hydra.sweep.dir={mode}"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        runs[mode] = out.stdout
    count = {mode: int(text.rsplit("compositions ", 1)[1]) for mode, text in runs.items()}
    assert count["plain"] - count["fast"] == 4, f"4 jobs, each composed once less: {count}"
    jobs = {mode: [line for line in text.splitlines() if line.startswith("job ")] for mode, text in runs.items()}
    assert jobs["fast"] == jobs["plain"] == ["job 1 3", "job 1 5", "job 2 3", "job 2 5"]
    plain = sorted(p.relative_to(tmp_path / "plain") for p in (tmp_path / "plain").rglob("*") if p.is_file())
    fast = sorted(p.relative_to(tmp_path / "fast") for p in (tmp_path / "fast").rglob("*") if p.is_file())
    assert fast == plain and len([p for p in fast if p.parent.name == ".hydra"]) == 12
    for path in fast:
        text = (tmp_path / "fast" / path).read_text().replace("fast", "plain")
        assert text == (tmp_path / "plain" / path).read_text(), path


# Group choices (model, dtype, preset, a nested group) mixed with config values: jobs 2 and 6 choose what an
# earlier job chose, in the same order, so they share its defaults list and merge; job 4 makes job 3's choices
# in another order and composes afresh (the key keeps the order: ``+group=...`` appends in it).
REAL_BATCH = [["model=tiny_flux2_decoder", "dtype=float32", "seed=1"],
              ["model=tiny_flux2_decoder", "dtype=float32", "seed=2", "preset.height=48"],
              ["model=tiny_ltx_t2v", "dtype=bfloat16", "preset=balanced", "seed=1"],
              ["preset=balanced", "model=tiny_ltx_t2v", "seed=3", "dtype=bfloat16", "bench.warmup=2"],
              ["model=tiny_ltx_t2v", "model/task=text_to_video", "dtype=float16", "preset=quality"],
              ["model=tiny_ltx_t2v", "model/task=text_to_video", "dtype=float16", "preset=quality", "seed=9"],
              ["model=tiny_flux2_decoder", "dtype=float32", "device=cpu", "metric=image"]]


@pytest.fixture
def real_loader():
    """Hydra's config loader on ascendbench's own config, with the wrappers installed."""
    from ascendbench.config.schemas import register
    from ascendbench.job.launch import register_resolvers

    assert hydra_compose.faster_composition()
    register()
    register_resolvers()
    hydra_compose.forget()
    GlobalHydra.instance().clear()
    with initialize_config_module("ascendbench.conf", version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        yield loader, loader.load_configuration("config", [], run_mode=RunMode.MULTIRUN)
    GlobalHydra.instance().clear()
    hydra_compose.forget()


def _checked_against_plain(loader, master) -> list[bool]:
    """Whether each job's config composed in the batch check (sharing) equals Hydra's plain composition."""
    plain = [OmegaConf.to_yaml(loader.load_sweep_config(master, job)) for job in REAL_BATCH]  # no check: plain
    _check(loader, master, REAL_BATCH)
    return [OmegaConf.to_yaml(loader.load_sweep_config(master, job)) == text
            for job, text in zip(REAL_BATCH, plain, strict=True)]


def test_jobs_choosing_the_same_groups_share_a_composition_equal_to_hydras(real_loader):
    loader, master = real_loader
    assert _checked_against_plain(loader, master) == [True] * len(REAL_BATCH)
    assert hydra_compose.shared_compositions() == 2, "jobs 2 and 6 took an earlier job's defaults list"


def test_a_key_blind_to_the_group_choices_would_be_caught(real_loader, monkeypatch):
    loader, master = real_loader
    split = hydra_compose._split
    monkeypatch.setattr(hydra_compose, "_split", lambda repo, overrides: ((), split(repo, overrides)[1]))
    same = _checked_against_plain(loader, master)
    assert same[0] and not all(same), "configs of other models, dtypes and presets handed out: found"


def test_another_hydra_version_is_left_as_it_is(monkeypatch):
    monkeypatch.setattr(hydra, "__version__", "1.4.0")
    assert not hydra_compose.supported()
    assert not hydra_compose.reuse_checked_compositions() and not hydra_compose.parse_files_once()
    assert not hydra_compose.share_group_compositions()
