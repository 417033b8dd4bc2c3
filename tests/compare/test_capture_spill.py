"""CallRecorder with ``spill``: each sampled call on disk as it finishes, superseded ``last``
candidates removed, the job holding no recorded tensor."""

from __future__ import annotations

import torch
from safetensors import safe_open

from ascendbench.compare.capture import CallRecorder


def test_first_and_last_calls_are_spilled_one_file_each(tmp_path) -> None:
    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 3)
    recorder = CallRecorder({"layer": layer}, ["first", "last"], 1 << 20, spill=tmp_path / "calls")
    inputs = [torch.full((2, 4), float(i)) for i in range(4)]
    with torch.no_grad():
        outputs = [layer(x) for x in inputs]
    recorder.close()
    manifest = recorder.manifest()
    assert [c["key"] for c in manifest["calls"]] == ["layer#0", "layer#3"]
    assert recorder.tensors == {}, "nothing recorded stays in memory"
    files = sorted(p.name for p in (tmp_path / "calls").iterdir())
    kept = sorted(c["file"] for c in manifest["calls"])
    assert files == kept, "the superseded last candidates are deleted"
    for call, index in zip(manifest["calls"], (0, 3), strict=True):
        with safe_open(str(tmp_path / "calls" / call["file"]), framework="pt") as handle:
            assert torch.equal(handle.get_tensor(call["args"]["seq"][0]["t"]), inputs[index])
            assert torch.equal(handle.get_tensor(call["outputs"][0]), outputs[index])
    assert recorder.kept_bytes == sum(c["nbytes"] for c in manifest["calls"])


def test_the_byte_cap_drops_calls_on_disk_too(tmp_path) -> None:
    layer = torch.nn.Linear(4, 3)
    one_call = (2 * 4 + 2 * 3) * 4
    recorder = CallRecorder({"layer": layer}, [0, 1, 2], one_call * 2, spill=tmp_path / "calls")
    with torch.no_grad():
        for _ in range(3):
            layer(torch.ones(2, 4))
    recorder.close()
    assert recorder.dropped == ["layer#2"] and len(list((tmp_path / "calls").iterdir())) == 2
