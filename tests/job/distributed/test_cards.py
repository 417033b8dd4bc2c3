"""The card pool gives a job of ``device.world_size=N`` N distinct free cards, or refuses."""

from __future__ import annotations

import pytest
from filelock import FileLock
from omegaconf import OmegaConf

from ascendbench.callbacks.cards import CardPool
from ascendbench.devices.cards import claim_card
from ascendbench.errors import NoFreeCardError
from ascendbench.job.launch import LaunchRefused

from helpers import release_card


@pytest.fixture(autouse=True)
def _no_card_held():
    release_card()
    yield
    release_card()


def test_a_two_card_job_gets_two_distinct_free_cards(tmp_path):
    other = FileLock(str(tmp_path / "card-0.lock"))
    other.acquire()  # another worker holds card 0
    try:
        assert claim_card(["0", "1", "2"], tmp_path, wait_s=0.5, count=2) == "1,2"
    finally:
        other.release()


def test_too_few_free_cards_refuse_and_release_the_partial_claim(tmp_path):
    other = FileLock(str(tmp_path / "card-1.lock"))
    other.acquire()
    try:
        with pytest.raises(NoFreeCardError, match="no 2 free cards"):
            claim_card(["0", "1"], tmp_path, wait_s=0.3, count=2)
    finally:
        other.release()
    probe = FileLock(str(tmp_path / "card-0.lock"))
    probe.acquire(timeout=0)  # card 0, claimed while waiting, was given back
    probe.release()


def test_a_sweep_needing_more_cards_than_the_pool_is_refused():
    pool = CardPool(cards=[0, 1, 2])
    config = OmegaConf.create({"hydra": {"launcher": {"n_jobs": 2}}, "device": {"world_size": 2}})
    with pytest.raises(LaunchRefused, match="2 card\\(s\\) each"):
        pool.on_multirun_start(config)
    pool.on_multirun_start(OmegaConf.create({"hydra": {"launcher": {"n_jobs": 1}},
                                             "device": {"world_size": 2}}))


def test_slurm_gives_a_multi_card_job_its_cards_in_one_task():
    from helpers.config import compose_config

    cfg = compose_config(["hydra/launcher=slurm_cards", "device=cpu", "device.world_size=2",
                          "device.parallel=cfg"],
                         return_hydra_config=True)
    launcher = cfg.hydra.launcher
    # the job spawns its own ranks
    assert (launcher.gpus_per_node, launcher.tasks_per_node) == (2, 1)
    assert compose_config(["hydra/launcher=slurm_cards"],
                          return_hydra_config=True).hydra.launcher.gpus_per_node == 1
