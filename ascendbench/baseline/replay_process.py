"""``python -m ascendbench.baseline.replay_process``: the clean process of the replay reference.

As ``python -m ascendbench.baseline`` does, it first ties its life to the job that started it, then blocks
torch_npu, before anything imports torch; then :func:`ascendbench.baseline.replay_child.main` reads the
request from standard input (a pipe from the job, never a file).
"""

from __future__ import annotations


def start() -> int:
    """Lifeline, torch_npu guard, then the replay."""
    from ascendbench.baseline.__main__ import hold_lifeline

    hold_lifeline()
    from ascendbench.baseline.guard import block_torch_npu

    block_torch_npu()
    from ascendbench.baseline.replay_child import main

    return main()


if __name__ == "__main__":
    raise SystemExit(start())
