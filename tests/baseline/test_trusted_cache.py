"""Trusted caches and one reference per workload, at the level of the cache service: every entry is
verified against the digests in its meta.json, anything that does not verify is recomputed, and a
higher-precision entry serves a lower-precision request."""

from __future__ import annotations

import json
import logging

import pytest
import torch
from hydra.utils import instantiate
from safetensors.torch import load_file, save_file

from ascendbench.baseline.service import ReferenceQuery, get_or_compute
from ascendbench.baseline.store import BaselineStore, DamagedEntry, file_digest
from ascendbench.errors import BaselineError
from ascendbench.tasks.inputs import describe

from helpers import TINY_RUN, build_tiny_flux2

WEIGHTS = {"kind": "random-init", "init_seed": 42}


@pytest.fixture
def query(compose_cfg, tmp_path):
    """``query(precision=float64, *overrides)``: the tiny decoder's query, reference in-process."""

    def make(precision: torch.dtype = torch.float64, *overrides: str) -> ReferenceQuery:
        cfg = compose_cfg(["model=tiny_flux2_decoder", *TINY_RUN,
                           f"baseline.cache_dir={tmp_path / 'cache'}",
                           "baseline.process=in-process", *overrides])
        task = instantiate(cfg.model.task)
        inputs = task.make_inputs(cfg.preset, cfg.seed)
        return ReferenceQuery(cfg, task, inputs, precision, WEIGHTS, describe(inputs),
                              build_tiny_flux2(), tmp_path / "job")

    return make


def _edit_meta(entry, edit) -> None:
    meta = json.loads((entry / "meta.json").read_text())
    edit(meta)
    (entry / "meta.json").write_text(json.dumps(meta))


def test_the_cache_entry_records_the_digest_size_and_shapes_of_its_files(query, tmp_path):
    result = get_or_compute(query())
    entry = tmp_path / "cache" / result.info["cache_key"]
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["digests"]["outputs.safetensors"] == file_digest(entry / "outputs.safetensors")
    assert meta["outputs"] == {"image": {"shape": list(result["image"].shape), "dtype": "float64"}}
    assert result.info["computed"] is True and "rejected" not in result.info


OUTPUTS = "outputs.safetensors"


@pytest.mark.parametrize("damage, bad_file, why", [
    (lambda e: (e / "meta.json").write_text("[1, 2]"), "meta.json", "holds a list"),
    (lambda e: (e / "meta.json").unlink(), "meta.json", "is missing beside outputs.safetensors"),
    (lambda e: (e / OUTPUTS).unlink(), OUTPUTS, "is missing although meta.json"),
    (lambda e: save_file({"image": load_file(str(e / OUTPUTS))["image"].float()}, str(e / OUTPUTS)),
     OUTPUTS, "image float32"),
    (lambda e: save_file({"other": torch.zeros(1, dtype=torch.float64)}, str(e / OUTPUTS)),
     OUTPUTS, "holds other float64 [1]"),
    (lambda e: _edit_meta(e, lambda m: m.update(precision="float32")), "meta.json",
     "records precision 'float32'"),
    (lambda e: _edit_meta(e, lambda m: m.update(key="0" * 32)), "meta.json", "belongs to the key"),
    (lambda e: _edit_meta(e, lambda m: m["material"].update(seed=7)), "meta.json",
     "does not hash to its key"),
    (lambda e: _edit_meta(e, lambda m: m["digests"][OUTPUTS].update(bytes=1)), OUTPUTS,
     "bytes where meta.json records 1"),
], ids=["meta-not-an-object", "meta-deleted", "outputs-deleted", "outputs-wrong-dtype",
        "outputs-missing-key", "meta-wrong-precision", "meta-of-another-key",
        "meta-material-edited", "size-differs"])
def test_a_damaged_cache_entry_is_rejected_and_recomputed(query, tmp_path, caplog, damage, bad_file,
                                                          why):
    first = get_or_compute(query())
    entry = tmp_path / "cache" / first.info["cache_key"]
    damage(entry)
    with caplog.at_level(logging.WARNING, logger="ascendbench.baseline"):
        again = get_or_compute(query())
    assert again.info["cache_hit"] is False and again.info["computed"] is True
    (rejected,) = again.info["rejected"]
    assert rejected["file"] == str(entry / bad_file) and why in rejected["why"]
    assert rejected["action"] == "recomputed"
    lines = [r.getMessage() for r in caplog.records if "rejected" in r.getMessage()]
    assert len(lines) == 1 and str(entry / bad_file) in lines[0] and why in lines[0]
    assert torch.equal(again["image"], first["image"])
    assert get_or_compute(query()).info["cache_hit"] is True, "the recomputed entry verifies"


def test_a_tampered_layer_capture_is_recomputed_but_the_outputs_are_kept(query, tmp_path):
    first = get_or_compute(query(torch.float64, "compare.layers=all"))
    entry = tmp_path / "cache" / first.info["cache_key"]
    capture = entry / "modules-all.json"
    data = json.loads(capture.read_text())
    data["modules"][0]["max_abs"] = 123.0
    capture.write_text(json.dumps(data))
    again = get_or_compute(query(torch.float64, "compare.layers=all"))
    assert (again.info["computed"], again.info["computed_layers"]) == (False, True)
    rejected = again.info["rejected"][0]
    assert rejected["file"] == str(capture) and "replaced" in rejected["why"]
    assert again.layers == first.layers


def test_a_layer_capture_without_a_digest_is_not_trusted(query, tmp_path):
    first = get_or_compute(query(torch.float64, "compare.layers=all"))
    entry = tmp_path / "cache" / first.info["cache_key"]
    _edit_meta(entry, lambda m: m["digests"].pop("modules-all.json"))
    again = get_or_compute(query(torch.float64, "compare.layers=all"))
    assert again.info["computed_layers"] is True
    assert "older ascendbench" in again.info["rejected"][0]["why"]


def test_an_entry_that_does_not_read_back_after_computing_is_an_error_naming_the_file(query,
                                                                                    monkeypatch):
    def always_damaged(self, key, meta):
        raise DamagedEntry(self.entry(key) / OUTPUTS, "is planted as damaged")

    monkeypatch.setattr(BaselineStore, "read_outputs", always_damaged)
    planted = f"does not read back: .*{OUTPUTS} is planted as damaged"
    with pytest.raises(BaselineError, match=planted):
        get_or_compute(query())


def test_a_float64_reference_serves_a_float32_request_of_the_same_workload(query, tmp_path):
    computed = get_or_compute(query(torch.float64))
    float32 = query(torch.float32)
    assert float32.cached(), "the plan and the memory guard see the float64 entry"
    served = get_or_compute(float32)
    info = served.info
    assert info["cache_hit"] is True and info["computed"] is False
    assert (info["requested_precision"], info["precision"]) == ("float32", "float64")
    assert info["cache_key"] == computed.info["cache_key"] and info["requested_key"] == float32.key
    assert served["image"].dtype == torch.float64
    assert torch.equal(served["image"], computed["image"])
    entries = [p.name for p in (tmp_path / "cache").iterdir() if p.is_dir()]
    assert entries == [computed.info["cache_key"]]


def test_a_float32_reference_does_not_serve_a_float64_request(query):
    get_or_compute(query(torch.float32))
    float64 = query(torch.float64)
    assert not float64.cached()
    result = get_or_compute(float64)
    assert result.info["computed"] is True and result.info["precision"] == "float64"


def test_a_damaged_float64_entry_is_skipped_and_the_float32_request_computes_its_own(query,
                                                                                    tmp_path):
    computed = get_or_compute(query(torch.float64))
    entry = tmp_path / "cache" / computed.info["cache_key"]
    tensors = load_file(str(entry / OUTPUTS))
    save_file({k: v + 1 for k, v in tensors.items()}, str(entry / OUTPUTS))
    result = get_or_compute(query(torch.float32))
    assert result.info["computed"] is True and result.info["precision"] == "float32"
    (rejected,) = result.info["rejected"]
    assert rejected["file"] == str(entry / OUTPUTS)
    assert "float32 reference is used" in rejected["action"]
