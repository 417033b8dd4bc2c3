"""The cfg split and the block placement on a real 2-rank gloo group (127.0.0.1, a free port), in
spawned processes: each gives the single-process outputs, and each is shown failing on a planted
fault."""

from __future__ import annotations

import datetime
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from ascendbench.job.distributed import modes
from ascendbench.job.distributed.ranks import free_port


class _Denoiser(nn.Module):
    """A real module called like a diffusers denoiser: hidden_states, encoder_hidden_states,
    timestep."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.text = nn.Linear(3, 4)

    def forward(self, hidden_states, encoder_hidden_states=None, timestep=None, return_dict=False):
        out = self.proj(hidden_states) + self.text(encoder_hidden_states) * timestep[:, None]
        return (out,)


class _Pipe:
    do_classifier_free_guidance = True

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.transformer = _Denoiser()


class _Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def forward(self, x):
        for block in self.blocks:
            x = torch.tanh(block(x))
        return x


def _inputs():
    generator = torch.Generator().manual_seed(1)
    return (torch.randn(2, 4, generator=generator), torch.randn(2, 3, generator=generator),
            torch.tensor([3.0, 3.0]))


def _worker(rank: int, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=60))
    pipe = _Pipe()
    split = modes.CfgSplit(rank, pipe).install()
    hidden, text, timestep = _inputs()
    with torch.inference_mode():
        cfg_out = pipe.transformer(hidden_states=hidden, encoder_hidden_states=text,
                                   timestep=timestep)[0]
        # planted fault: both ranks compute the conditional half
        modes.CFG_PART.update({0: 1, 1: 1})
        faulty = pipe.transformer(hidden_states=hidden, encoder_hidden_states=text,
                                  timestep=timestep)[0]
    stack = _Stack()
    placement = modes.BlockPlacement(rank, 2).install(stack)
    placed_out = stack(hidden)
    torch.save({"cfg": cfg_out, "faulty": faulty, "calls": split.calls, "placed": placed_out,
                "placement": placement.to_dict()}, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


def _single_process():
    pipe, stack = _Pipe(), _Stack()
    hidden, text, timestep = _inputs()
    with torch.inference_mode():
        return pipe.transformer(hidden_states=hidden, encoder_hidden_states=text,
                                timestep=timestep)[0], stack(hidden)


def test_two_ranks_give_the_single_process_outputs_and_a_planted_fault_does_not(tmp_path):
    mp.start_processes(_worker, args=(free_port(), str(tmp_path)), nprocs=2, start_method="spawn")
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    cfg_ref, placed_ref = _single_process()
    for rank in ranks:
        # both ranks hold the full [uncond, cond] batch
        torch.testing.assert_close(rank["cfg"], cfg_ref)
        torch.testing.assert_close(rank["placed"], placed_ref)
        # the conditional half in the unconditional's place
        assert not torch.allclose(rank["faulty"], cfg_ref)
        assert rank["calls"] == 2
    assert ranks[0]["placement"]["by_rank"] == {"0": "blocks[0:2]", "1": "blocks[2:3]"}
    assert ranks[0]["placement"]["held_block_mb"] > ranks[1]["placement"]["held_block_mb"] > 0
