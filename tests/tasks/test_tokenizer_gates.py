"""Replay: a method's return values recorded during one pass come back, unchanged, in the next."""

from __future__ import annotations

import pytest
import torch

from ascendbench.errors import TaskError
from ascendbench.tasks.tokenizer_gates import Replay


class Noisy(torch.nn.Module):
    """Fresh noise each call, as a tensor (``encode``) or in a data dict (``encode_dict``)."""

    def encode(self, x):
        return x + torch.randn_like(x)

    def encode_dict(self, data):
        data["latents"] = [data["video"] + torch.randn_like(data["video"])]
        return data


def test_tensors_recorded_once_come_back_in_order_and_the_method_is_restored():
    module, x = Noisy(), torch.zeros(2)
    replay = Replay(module, "encode")
    with replay.recording():
        first = [module.encode(x), module.encode(x)]
    kept = first[0].clone()
    first[0].add_(100)  # a caller changing its result in place does not change what is replayed
    with replay.replaying():
        again = [module.encode(x), module.encode(x)]
        with pytest.raises(TaskError, match="called more often than while recording"):
            module.encode(x)
    assert torch.equal(again[0], kept) and torch.equal(again[1], first[1])
    assert "encode" not in vars(module)
    assert not torch.equal(module.encode(x), again[1]), "the class method again"


def test_a_data_dict_method_gets_its_recorded_entries_merged_into_the_new_dict():
    module = Noisy()
    replay = Replay(module, "encode_dict")
    with replay.recording():
        first = module.encode_dict({"video": torch.zeros(3)})
    data = {"video": torch.zeros(3), "other": 1}
    with replay.replaying():
        returned = module.encode_dict(data)
    assert returned is data and data["other"] == 1
    assert torch.equal(data["latents"][0], first["latents"][0])


def test_only_methods_can_be_replayed():
    with pytest.raises(TaskError, match="no method 'decode'"):
        Replay(Noisy(), "decode")
