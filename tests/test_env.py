"""The record's env section carries the facts the seed reports printed."""

from __future__ import annotations

from ascendbench import env

from helpers import TINY_RUN, read_record


def test_a_tiny_jobs_env_names_revision_drivers_cann_libraries_and_device_memory(cli):
    result, job = cli("model=tiny_flux2_decoder", *TINY_RUN, "baseline.process=in-process")
    assert result.returncode == 0, result.stdout + result.stderr
    facts = read_record(job)["env"]
    for key in ("ascendbench", "git_revision", "git_dirty", "cann", "cann_source", "drivers",
                "torch_build",
                "libraries", "device"):
        assert key in facts, key
    assert {"accelerate", "peft", "torch", "torch_npu", "diffusers"} <= set(facts["libraries"])
    assert facts["device"]["total_memory_gb"] > 0
    assert facts["torch_build"]["cuda"] == env.torch.version.cuda


def test_the_revision_of_this_checkout_is_a_commit_with_a_dirty_flag():
    revision = env.source_revision()
    if revision["git_revision"] is None:  # an installed package: nothing to read, and it says so
        assert revision["git_dirty"] is None
        return
    assert len(revision["git_revision"]) == 40 and isinstance(revision["git_dirty"], bool)


def test_no_git_means_no_revision_rather_than_an_error(monkeypatch):
    env.source_revision.cache_clear()
    monkeypatch.setattr(env, "_git", lambda args, cwd: None)
    try:
        assert env.source_revision()["git_revision"] is None
    finally:
        env.source_revision.cache_clear()
