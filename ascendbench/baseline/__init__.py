"""A job's CPU reference ("baseline"): computed once in a clean process, cached by content hash.

Imports nothing: the reference process blocks torch_npu before torch is first imported."""
