"""``python -m ascendbench.baseline.replay_process``: the clean process of the replay reference.

As ``python -m ascendbench.baseline`` does, it first ties its life to the job that started it, then blocks
torch_npu, before anything imports torch; then :func:`ascendbench.baseline.replay_child.main` reads the
request from standard input (a pipe from the job, never a file).
"""

from __future__ import annotations

import sys

USAGE = """usage: python -m ascendbench.baseline.replay_process < REQUEST

The clean CPU process of an ascendbench job's replay reference (baseline.reference_mode=replay): it reads the
job's request from standard input, re-runs each recorded module alone without torch_npu, and writes the local
errors where the request says. Jobs start it; there is no need to run it by hand."""


def start(argv: list[str] | None = None) -> int:
    """Lifeline, torch_npu guard, then the replay (``--help``: the usage)."""
    if any(arg in ("-h", "--help") for arg in (sys.argv[1:] if argv is None else argv)):
        print(USAGE)
        return 0
    from ascendbench.baseline.__main__ import hold_lifeline

    hold_lifeline()
    from ascendbench.baseline.guard import block_torch_npu

    block_torch_npu()
    from ascendbench.baseline.replay_child import main

    return main()


if __name__ == "__main__":
    raise SystemExit(start())
