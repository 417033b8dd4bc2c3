"""The CPU reference ("baseline") of a job: computed once in a clean process, cached by content hash.

Imports nothing, so that the reference process can block torch_npu before torch is first imported."""
