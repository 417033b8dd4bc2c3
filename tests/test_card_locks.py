"""The card pool's locks interlock with the ``flock /tmp/npu_card<N>.lock`` scripts teams already
run.

A real ``flock(1)`` process holds a card's lock file (as the VideoFlexTok seed's ``flock -w 7200
/tmp/npu_card0.lock bash -c ...`` does); the pool, pointed at the same names, sees that card busy.
"""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from ascendbench.callbacks.cards import CardPool
from ascendbench.devices.cards import claim_card
from ascendbench.errors import ConfigError, NoFreeCardError

from helpers import release_card

pytestmark = pytest.mark.skipif(shutil.which("flock") is None,
                                reason="util-linux flock(1) is not installed")


@pytest.fixture
def held(tmp_path):
    """``flock`` holding ``<tmp>/npu_card0.lock`` until the test ends."""
    path = tmp_path / "npu_card0.lock"
    proc = subprocess.Popen(["flock", "-n", str(path), "-c", "echo held; sleep 60"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield path
    proc.kill()
    proc.wait()
    release_card()


def test_a_card_held_by_a_flock_script_is_busy(held):
    assert claim_card(["0", "1"], held.parent, wait_s=1, lock_name="npu_card{card}.lock") == "1"


def test_only_that_card_left_means_no_free_card(held):
    start = time.monotonic()
    with pytest.raises(NoFreeCardError, match=r"no free card in the pool \['0'\]"):
        claim_card(["0"], held.parent, wait_s=0.5, lock_name="npu_card{card}.lock")
    assert time.monotonic() - start < 5


def test_the_default_names_do_not_see_the_script(held):
    """The planted fault: with the pool's own names the flock script's card looks free (what
    lock_name fixes)."""
    assert claim_card(["0"], held.parent, wait_s=0.5) == "0"


def test_a_lock_name_without_the_card_is_refused():
    with pytest.raises(ConfigError, match="lock_name='npu.lock'.*\\{card\\}"):
        CardPool(cards=[0], lock_name="npu.lock")
