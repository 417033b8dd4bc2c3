"""The acceptance suite: one command that proves the harness on whatever device is present.

``python -m ascendbench.acceptance device=cuda`` (``make device-check``) runs each check and writes
``acceptance.md`` and ``acceptance.json``; every check prints PASS/FAIL/SKIP with its figure and the exit
status is 1 when any check failed. ``device=cpu`` is the dry form (small sizes, same code paths) that the
tests and CI run. The checks (:mod:`ascendbench.acceptance.checks`):

* ``verify``: the device lines of ``python -m ascendbench.verify``;
* ``timing``: the harness median of a GEMM against a plain synchronized host-clock loop and a plain
  device-event loop on the same operation (ratios within 0.98-1.02);
* ``mfu``: a dense GEMM through the whole job path (``model=gemm``): FLOPs counted equal 2*M*N*K
  exactly, achieved TFLOP/s and MFU against the peak table (>= 50 % in bf16 on an accelerator);
* ``memory``: the harness' peak allocated memory against the runtime's own counter around the same call;
* ``oom_sweep``: a 3-job sweep whose middle job cannot fit: it fails (reason ``oom`` on a device), the
  others are ok (memory released);
* ``accuracy``: FLUX.2-small-decoder (tiny twin on the CPU) in every dtype against the CPU reference,
  with the references read from ``cache=DIR`` when it holds them (computed beforehand on another host);
* ``cards``: ``hydra/launcher=joblib_cards`` over the cards present (two stand-in cards on the CPU): each worker
  on its own card; and two workers on one card refused before any job runs.

docs/devices.md says how to read the report.
"""
