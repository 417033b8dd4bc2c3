"""A job over several cards (``device.world_size=N``): N ranks of one torch.distributed group, one
record; every other stage runs in the parent, so the gate judges rank 0's outputs like any run's."""
