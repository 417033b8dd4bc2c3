"""The patch registry: names, options, checks with install hints, devices, restore in finally."""

from __future__ import annotations

import pytest
import torch

from ascendbench.errors import PatchError
from ascendbench.patches import registry
from ascendbench.patches.registry import (
    Check,
    Patch,
    available_patches,
    parse_specs,
    patches_applied,
)


class Flag(torch.nn.Module):
    """A module whose ``state`` attribute the test patches flip."""

    def __init__(self) -> None:
        super().__init__()
        self.state = "original"


def _make_patch(name: str, log: list, fail_apply: bool = False,
                check_reason: str | None = None) -> type:
    class Toggle(Patch):
        def __init__(self, value: str = "patched") -> None:
            self.value, self.target = value, None

        def apply(self, target):
            self.target, self.before = target, target.state
            target.state = self.value
            log.append(f"apply {name}")
            if fail_apply:
                raise RuntimeError("apply failed half-way")
            return {"value": self.value}

        def restore(self):
            log.append(f"restore {name}")
            if self.target is not None:
                self.target.state = self.before

    checks = (Check("always_ok", lambda patch, target: None),
              Check("gate", lambda patch, target: check_reason))
    return registry.register_patch(name, checks=checks,
                                   install_hint="Install the frobnicator.")(Toggle)


@pytest.fixture
def toy(monkeypatch):
    """Register throw-away patches for one test; the registry is restored afterwards."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    log: list[str] = []
    _make_patch("toy_a", log)
    _make_patch("toy_b", log)
    return log


def test_shipped_patches_are_registered():
    assert {"flex_attention_dense", "diffusers_attention_backend"} <= set(available_patches())


def test_unknown_name_lists_the_registered_patches():
    with pytest.raises(PatchError, match="flex_attention_dense") as info:
        parse_specs(["flex_attention_sparse"])
    assert "'flex_attention_sparse'" in str(info.value)


@pytest.mark.parametrize("value", ["flex_attention_dense", [{"devices": ["npu"]}], [3]])
def test_malformed_model_patches_are_refused(value):
    with pytest.raises(PatchError, match="model.patches"):
        parse_specs(value)


def test_unknown_option_names_the_accepted_ones(toy):
    with pytest.raises(PatchError, match="has no option.*colour.*value"):
        with patches_applied([{"name": "toy_a", "colour": "red"}], Flag(), "cpu"):
            pass


def test_apply_and_restore_in_reverse_order(toy):
    module = Flag()
    with patches_applied(["toy_a", {"name": "toy_b", "value": "second"}], module, "cpu") as infos:
        assert module.state == "second"
        assert [i["name"] for i in infos] == ["toy_a", "toy_b"] and infos[1]["value"] == "second"
    assert module.state == "original"
    assert toy == ["apply toy_a", "apply toy_b", "restore toy_b", "restore toy_a"]


def test_restored_when_the_run_raises(toy):
    module = Flag()
    with pytest.raises(ValueError):
        with patches_applied(["toy_a"], module, "cpu"):
            assert module.state == "patched"
            raise ValueError("the run failed")
    assert module.state == "original"


def test_a_failing_apply_is_undone_with_the_ones_before(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    log: list[str] = []
    _make_patch("good", log)
    _make_patch("bad", log, fail_apply=True)
    module = Flag()
    with pytest.raises(RuntimeError, match="half-way"):
        with patches_applied(["good", "bad"], module, "cpu"):
            pass
    assert module.state == "original" and log[-2:] == ["restore bad", "restore good"]


def test_failed_check_names_the_check_and_the_install_hint(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    _make_patch("needs_tool", [], check_reason="the frobnicator is not installed")
    module = Flag()
    with pytest.raises(PatchError) as info:
        with patches_applied(["needs_tool"], module, "cpu"):
            pass
    message = str(info.value)
    assert "'needs_tool'" in message and "'gate'" in message and "not installed" in message
    assert "Install the frobnicator." in message and module.state == "original"


def test_devices_limit_where_a_patch_applies(toy):
    module = Flag()
    spec = [{"name": "toy_a", "devices": ["npu"]}]
    with patches_applied(spec, module, "cpu") as infos:
        assert module.state == "original" and "not applied on cpu" in infos[0]["skipped"]
    with patches_applied(spec, module, "npu"):
        assert module.state == "patched"


def test_no_patches_is_a_no_op():
    with patches_applied(None, Flag(), "cpu") as infos:
        assert infos == []
