"""A job over several cards (``device.world_size=N``): N ranks of one torch.distributed group, one
record; the parent job runs every other stage as usual, so the accuracy gate judges the parallel
run's outputs like any run's."""
