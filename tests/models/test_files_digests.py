"""The sha256sum lines of a pipeline's weights name each file by its path in the pipeline folder
(six components' `diffusion_pytorch_model.safetensors` were six identical names)."""

from __future__ import annotations

import hashlib

from ascendbench.models.sources import files_digests


def test_each_file_is_named_by_its_path_below_the_common_folder(tmp_path):
    files = []
    for component, data in (("vae", b"v"), ("transformer", b"t")):
        path = tmp_path / "pipe" / component / "diffusion_pytorch_model.safetensors"
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
        files.append(path)
    digest, lines, sizes = files_digests(tuple(files))
    assert lines == [f"{hashlib.sha256(b't').hexdigest()}  transformer/diffusion_pytorch_model"
                     ".safetensors",
                     f"{hashlib.sha256(b'v').hexdigest()}  vae/diffusion_pytorch_model.safetensors"]
    assert sizes == [1, 1] and digest.startswith("sha256:")
    one = tmp_path / "model.safetensors"
    one.write_bytes(b"x")
    assert files_digests((one,))[1] == [f"{hashlib.sha256(b'x').hexdigest()}  model.safetensors"]
