"""A job over several cards: ``device.world_size=N`` ranks of one torch.distributed group, one record.

    python -m ascendbench model=tiny_ltx_t2v device=cpu device.world_size=2 device.parallel=cfg

* :mod:`.settings` -- the keys (world size, mode, backend by device type: hccl / nccl / gloo), checked.
* :mod:`.launcher` -- spawns the ranks, waits, stops them all when one fails (the rank named).
* :mod:`.rank` -- one rank: the same stages as the job, its mode, the barrier-synchronized timed calls.
* :mod:`.modes` -- cfg (guidance branches over 2 ranks), device_map (blocks over ranks), context (diffusers).
* :mod:`.gather` -- the ranks' figures folded into the record (synchronized latency, per-rank memory).
* :mod:`.run` -- the device run stage's entry: check the mode, run the ranks, fold their figures.
* :mod:`.plan` -- the dry run's memory per rank.

The parent job runs every other stage as usual (the CPU reference, the metrics, the artifacts), so the
accuracy gate judges the parallel run's outputs like any run's.
"""
