"""A dry run prints its plan, not the ~330-line composed config of every job."""

from __future__ import annotations

from helpers import TINY_RUN


def test_a_dry_run_prints_the_plan_and_points_at_the_config(cli):
    result, job = cli("model=tiny_flux2_decoder", *TINY_RUN, "dry_run=true")
    assert result.returncode == 0, result.output[-3000:]
    stdout = result.stdout.splitlines()
    assert len(stdout) < 60, f"{len(stdout)} lines on stdout"
    assert any(str(job / "record.json") in line and "--cfg job" in line for line in stdout)
    assert not any(line.startswith("preset:") or line.startswith("  _target_:") for line in stdout)
