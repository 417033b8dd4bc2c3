"""Graph-mode variants: the backends by device type, torchair through a fake with torch_npu 2.9.0's
signatures, and ``device.compile`` as an A/B variant of the tiny FLUX.2 decoder through the real
CLI, beside eager."""

from __future__ import annotations

import sys
import types

import pytest
import torch
from torch import nn

from ascendbench import graph
from ascendbench.errors import ConfigError
from ascendbench.report.document import Report
from ascendbench.report.gather import records_frame
from ascendbench.report.settings import load_settings

from helpers.app import TINY_RUN, read_record, run_app


@pytest.mark.parametrize("node, device, named", [
    ({"compile": "xla"}, "cpu", "device.compile='xla'"),
    ({"compile": "torchair"}, "cpu", "runs on npu, not on cpu"),
    ({"compile": "cudagraphs"}, "npu", "runs on cuda, not on npu"),
])
def test_a_variant_the_device_cannot_run_is_refused(node, device, named):
    with pytest.raises(ConfigError) as caught:
        graph.variant_of(node, device)
    assert named in str(caught.value)


def test_inductor_on_a_cpu_without_a_compiler_is_refused(monkeypatch):
    monkeypatch.setattr(graph.shutil, "which", lambda name: None)
    with pytest.raises(ConfigError, match="needs a C\\+\\+ compiler"):
        graph.variant_of({"compile": "inductor"}, "cpu")


class _OptionValue:
    """torchair's OptionValue (configs/option_base.py): a value checked against its allowed
    options."""

    def __init__(self, default: str, optional: list[str]) -> None:
        self.value, self.optional = default, optional


class _CompilerConfig:
    """torchair.CompilerConfig's mode field (configs/compiler_config.py:39 of the torch_npu 2.9.0
    wheel): ``OptionValue("max-autotune", ["max-autotune", "reduce-overhead"])``; assigning a string
    sets its value."""

    def __init__(self) -> None:
        object.__setattr__(self, "mode",
                           _OptionValue("max-autotune", ["max-autotune", "reduce-overhead"]))

    def __setattr__(self, name, value):
        option = getattr(self, name)
        if value not in option.optional:
            raise ValueError(f"{name}={value!r} not in {option.optional}")
        option.value = value


def _fake_torchair(seen: list[str]) -> types.ModuleType:
    """``torchair`` as torch_npu-2.9.0-cp311-cp311-manylinux_2_28_x86_64.whl ships it
    (torch_npu/dynamo/torchair/npu_fx_compiler.py:846): ``get_npu_backend(*, compiler_config=None,
    custom_decompositions={})`` returns a dynamo backend ``(graph_module, example_inputs) ->
    callable``."""

    # the real signature, mutable default included
    def get_npu_backend(*, compiler_config=None, custom_decompositions={}):  # noqa: B006
        def backend(graph_module, example_inputs):
            seen.append(compiler_config.mode.value)
            # the captured graph, run eagerly (no Ascend graph engine here)
            return graph_module.forward
        return backend

    module = types.ModuleType("torchair")
    module.CompilerConfig, module.get_npu_backend = _CompilerConfig, get_npu_backend
    return module


@pytest.mark.parametrize("variant, mode",
                         [("torchair", "max-autotune"), ("aclgraph", "reduce-overhead")])
def test_torchair_variants_build_its_backend_with_their_mode(monkeypatch, variant, mode):
    seen: list[str] = []
    monkeypatch.setitem(sys.modules, "torchair", _fake_torchair(seen))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    model.decoder = nn.Linear(4, 4)
    x = torch.randn(2, 4)
    eager = model.decoder(x)
    info = graph.compile_model(model, "npu",
                               {"compile": variant, "compile_options": {"fullgraph": True}})
    torch.testing.assert_close(model.decoder(x), eager)
    assert (seen == [mode] and info["targets"] == ["decoder"]
            and info["options"] == {"fullgraph": True})
    torch._dynamo.reset()


def test_npugraph_ex_uses_the_backend_torch_npu_registers():
    # torch_npu/dynamo/__init__.py
    assert graph.backend_of(graph.VARIANTS["npugraph_ex"]) == "npugraph_ex"


def test_unknown_targets_are_refused():
    with pytest.raises(ConfigError, match="'vae.decoder' is not a module"):
        graph.targets(nn.Linear(2, 2), {"targets": ["vae.decoder"]})


@pytest.mark.slow
def test_compile_is_an_ab_variant_beside_eager_with_its_compile_time(tmp_path):
    # aot_eager captures the graph like inductor and needs no C++ compiler; inductor's CPU compile
    # of this decoder takes minutes on a 2-core host (docs/devices.md).
    result = run_app(["-m", "model=tiny_flux2_decoder", *TINY_RUN, "device.compile=none,aot_eager",
                      "bench.flops.enabled=false", "artifacts.media=false"], tmp_path)
    assert result.returncode == 0, result.output[-3000:]
    records = [read_record(p.parent) for p in result.job_dir.glob("*/record.json")]
    eager, compiled = sorted(records, key=lambda r: r["config"]["device"]["compile"] != "none")
    assert "compile" not in eager["bench"] and eager["verdict"] == "PASS"
    assert compiled["verdict"] == "PASS" and compiled["bench"]["compile"]["variant"] == "aot_eager"
    timed = compiled["bench"]["compile"]
    assert timed["first_call_ms"] > timed["compile_ms"] > 0
    report = Report(records_frame([result.job_dir]), load_settings(), ["sweep"]).markdown(tmp_path)
    variants = report.split("\n## A/B variants")[1].split("\n## ")[0]
    assert "device.compile=none" in variants and "device.compile=aot_eager" in variants
    graph_part = report.split("\n## Graph mode (compile cost)")[1].split("\n## ")[0]
    assert "none (eager)" in graph_part and "aot_eager" in graph_part


@pytest.mark.parametrize("search, values", [("graph", {"none", "inductor", "aot_eager"}),
                                            ("attention_npu", {"none", "torchair", "aclgraph"})])
def test_graph_mode_is_in_the_search_space(search, values):
    from helpers.config import compose_config

    cfg = compose_config([f"+search={search}"], return_hydra_config=True)
    choice = str(cfg.hydra.sweeper.params["device.compile"])
    assert {v.strip() for v in choice[len("choice("):-1].split(",")} == values
    assert all(v in graph.VARIANTS or v == "none" for v in values)
