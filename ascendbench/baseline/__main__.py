"""``python -m ascendbench.baseline REQUEST.json``: the clean reference process.

The torch_npu guard runs first, before anything imports torch or diffusers; this works because
``ascendbench/__init__.py`` and ``ascendbench/baseline/__init__.py`` import nothing heavy.
"""

from ascendbench.baseline.guard import block_torch_npu

block_torch_npu()

from ascendbench.baseline.child import main  # noqa: E402  (after the guard, on purpose)

if __name__ == "__main__":
    raise SystemExit(main())
