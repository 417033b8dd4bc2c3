"""A job's CPU reference, cached by content hash; imports nothing (torch_npu is blocked first)."""
