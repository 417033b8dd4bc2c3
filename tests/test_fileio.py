"""The one atomic-write helper: content, mode, and nothing left behind when a write fails."""

from __future__ import annotations

import os
import stat

import pytest

from ascendbench import fileio
from ascendbench.fileio import atomic_path, default_mode, write_atomic


def _mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def test_writes_text_and_bytes_and_creates_the_directory(tmp_path):
    target = tmp_path / "new" / "dir" / "a.json"
    assert write_atomic(target, '{"a": "é"}') == target
    assert target.read_text(encoding="utf-8") == '{"a": "é"}'
    write_atomic(target, b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01", "a second write replaces the content"
    assert [p.name for p in target.parent.iterdir()] == ["a.json"]


def test_mode_defaults_to_what_open_would_give_and_can_be_set(tmp_path):
    assert _mode(write_atomic(tmp_path / "default", "x")) == default_mode()
    assert _mode(write_atomic(tmp_path / "private", "x", mode=0o600)) == 0o600
    assert _mode(write_atomic(tmp_path / "shared", "x", mode=0o644)) == 0o644


def test_a_failed_rename_leaves_the_old_content_and_no_temp_file(tmp_path, monkeypatch):
    target = tmp_path / "record.json"
    write_atomic(target, "old")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(fileio.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, "new")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record.json"]


def test_a_writer_that_raises_leaves_no_temp_file(tmp_path):
    target = tmp_path / "outputs.safetensors"
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(target) as tmp:
            tmp.write_bytes(b"half")
            raise KeyboardInterrupt  # a job killed mid-write
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_atomic_path_hands_a_temp_name_in_the_same_directory(tmp_path):
    target = tmp_path / "layers.safetensors"
    with atomic_path(target) as tmp:
        assert (tmp.parent == tmp_path and tmp != target
                and tmp.name.startswith(".layers.safetensors."))
        tmp.write_text("done")
    assert target.read_text() == "done" and os.listdir(tmp_path) == ["layers.safetensors"]


def test_a_full_disk_names_the_file_and_stays_an_oserror(tmp_path):
    import errno

    from ascendbench.errors import OutputWriteError

    target = tmp_path / "tensors" / "device.safetensors"
    with pytest.raises(OutputWriteError) as caught:
        with atomic_path(target):
            raise OSError(errno.ENOSPC, "No space left on device")
    message = str(caught.value)
    assert str(target) in message and "disk" in message and "full" in message and "df -h" in message
    assert isinstance(caught.value, OSError), "callers catching OSError still catch it"
    assert list((tmp_path / "tensors").iterdir()) == []


def test_safetensors_error_of_a_full_disk_is_named_too(tmp_path):
    from safetensors import SafetensorError

    from ascendbench.errors import OutputWriteError

    target = tmp_path / "reference.safetensors"
    with pytest.raises(OutputWriteError, match="reference.safetensors.*full"):
        with atomic_path(target):
            raise SafetensorError("Error while serializing: IoError(Os { code: 28, kind: "
                                  "StorageFull })")


def test_errors_of_the_content_are_not_blamed_on_the_disk(tmp_path):
    with pytest.raises(ValueError):
        with atomic_path(tmp_path / "x.json"):
            raise ValueError("not a write failure")
