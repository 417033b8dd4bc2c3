"""ascendbench against real torch_npu: every name it reads and every message it parses, checked
against the manifests of the torch_npu wheels (tests/devices/npu_manifest, written by
scripts/npu_manifest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

import ascendbench
from ascendbench.job.failures import classify, is_oom
from ascendbench.job.placement import fallback_ops

from helpers import npu_scan
from helpers.fake_torch_npu import load_manifest, manifest_versions

PACKAGE = Path(ascendbench.__file__).resolve().parent
MANIFESTS = {version: load_manifest(version) for version in manifest_versions()}
# Named in conf/device/npu.yaml but read by another library, so no torch_npu wheel can confirm them.
OTHERS_ENV = {"OMP_NUM_THREADS": "OpenMP (the CPU thread pool)"}


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".post")[0].split(".")[:2])


def test_the_manifests_span_torch_npu_2_1_to_2_14():
    releases = sorted(_release(v) for v in MANIFESTS)
    assert len(MANIFESTS) >= 4 and releases[0] == (2, 1) and releases[-1] >= (2, 14), (
        sorted(MANIFESTS))
    for version, manifest in MANIFESTS.items():
        assert manifest["torch_npu"] == version and len(manifest["sha256"]) == 64
        assert {"torch_npu", "torch_npu.npu", "torch_npu.profiler"} <= set(manifest["modules"])


def test_every_torch_npu_name_ascendbench_reads_exists_in_every_version():
    uses = npu_scan.scan_tree(PACKAGE)
    labels = {u.label() for u in uses}
    # the scanner sees the paths that matter (else this test would pass on an empty scan)
    assert {"torch_npu.npu.synchronize", "torch_npu.npu.Event",
            "torch_npu.npu.max_memory_allocated",
            "torch_npu.npu.matmul", "torch_npu.profiler.profile"} <= labels, sorted(labels)
    owned = {f"{u.owner.partition(':')[2]}.{u.name}" for u in uses}
    assert "torch_npu.npu.matmul.allow_hf32" in owned
    problems = list(npu_scan.nonconforming(uses, MANIFESTS))
    assert not problems, "\n".join(problems)
    print("undecidable by the manifests:", *npu_scan.unverifiable(uses, MANIFESTS), sep="\n  ")


PLANTED = '''
import torch_npu

def profile(call):
    with torch_npu.profiler.profile(activities=[torch_npu.profiler.ProfilerActivity.NPU]) as prof:
        call()
    return prof.key_averages()
'''


def test_a_planted_key_averages_on_the_npu_profiler_is_reported(tmp_path):
    (tmp_path / "planted").mkdir()
    (tmp_path / "planted" / "profiling.py").write_text(PLANTED)
    problems = list(npu_scan.nonconforming(npu_scan.scan_tree(tmp_path / "planted"), MANIFESTS))
    assert len(problems) == 1, problems
    expected = ("planted/profiling.py:7: torch_npu.profiler.profile().key_averages is not in "
                "torch_npu")
    assert expected in problems[0]
    assert all(version in problems[0] for version in MANIFESTS)


def test_a_guard_accepts_a_name_some_versions_lack_but_not_one_none_has():
    source = ("import torch_npu\n"
              "def f(runtime, props):\n"
              "    getattr(runtime.get_device_properties(0), 'cube_core_num', None)\n"
              "    getattr(runtime, 'no_such_function', None)\n"
              "    runtime.get_device_properties(0).cube_core_num\n"
              # an operator of libtorch_npu.so, in every version
              "    torch_npu.npu_fusion_attention\n")
    lacking = [v for v, m in MANIFESTS.items()
               if "cube_core_num" not in m["device_property_fields"]]
    assert lacking, "a version without cube_core_num is what makes the guard needed"
    problems = list(npu_scan.nonconforming(npu_scan.scan_source(source, "guard.py"), MANIFESTS))
    assert [p.split(":")[1] for p in problems] == ["4", "5"], problems
    assert "no version has it" in problems[0] and all(v in problems[1] for v in lacking)


@pytest.mark.parametrize("version", sorted(MANIFESTS))
def test_the_fallback_texts_of_each_wheel_are_parsed(version):
    messages = MANIFESTS[version]["messages"]
    template = (messages["fallback_prefix"]["string"] + "aten::_unique2"
                + "' is not currently supported on the NPU backend and will fall back to run on "
                "the CPU. This may have performance implications.")
    assert all(messages[k]["present"] for k in ("fallback_prefix", "fallback_unsupported",
                                                "fallback_will_fall_back"))
    assert fallback_ops([template]) == ["aten::_unique2"]
    # "CAUTION: The operator aten::x is currently not supported ..."
    if messages["fallback_named_op"]["present"]:
        named = messages["fallback_named_op"]["string"]
        assert fallback_ops([named]) == [named.split("operator ")[1].split()[0].rstrip(",")]


@pytest.mark.parametrize("version", sorted(MANIFESTS))
def test_the_oom_text_of_each_wheel_is_an_oom_with_the_hint(version):
    messages = MANIFESTS[version]["messages"]
    for key in ("oom_tried_to_allocate", "oom_workspace_allocator"):
        if messages[key]["present"]:
            text = messages[key]["string"] + "2.00 GiB"
            typed = messages["c10_OutOfMemoryError"]["present"]
            error = torch.OutOfMemoryError(text) if typed else RuntimeError(text)
            assert is_oom(error)
            recorded, reason = classify(error, "npu", "the device run")
            assert reason == "oom" and "smaller preset" in str(recorded)
    assert messages["oom_tried_to_allocate"]["present"]


def test_every_npu_environment_variable_ascendbench_names_is_read_by_torch_npu():
    config = yaml.safe_load((PACKAGE.parent / "conf" / "device" / "npu.yaml").read_text())
    named = {*config.get("env", {}), *config.get("record_env", [])}
    read = {v for m in MANIFESTS.values() for v in (*m["env_vars"], *m["so_env_vars"])}
    unknown = sorted(named - read - set(OTHERS_ENV))
    assert not unknown, f"named in conf/device/npu.yaml, read by no torch_npu wheel: {unknown}"
    assert ("NOT_AN_NPU_VARIABLE" not in read
            and {"PYTORCH_NPU_ALLOC_CONF", "TASK_QUEUE_ENABLE"} <= read)


def test_every_torch_npu_message_ascendbench_matches_is_in_every_wheel(tmp_path):
    constants = npu_scan.message_constants(PACKAGE)
    assert any(text == "NPU out of memory." for _, text in constants), constants
    problems = list(npu_scan.unknown_messages(constants, MANIFESTS))
    assert not problems, "\n".join(problems)
    (tmp_path / "planted").mkdir()
    (tmp_path / "planted" / "failures.py").write_text('MARKERS = ("NPU ran out of memory", "NPU '
                                                      'out of memory.")\n')
    constants = npu_scan.message_constants(tmp_path / "planted")
    planted = list(npu_scan.unknown_messages(constants, MANIFESTS))
    assert len(planted) == 1, planted
    assert "'NPU ran out of memory' is in no message of torch_npu" in planted[0], planted
