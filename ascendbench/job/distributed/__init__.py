"""A job over several cards (``device.world_size=N``): N ranks of one group, one record."""
