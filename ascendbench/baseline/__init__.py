"""A job's CPU reference ("baseline"), cached by content hash. Imports nothing: the reference
process blocks torch_npu before torch is first imported."""
