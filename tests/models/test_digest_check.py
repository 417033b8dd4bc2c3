"""``model.expect_digest``: weights of another digest are refused, by the record's digest or by the
``sha256sum`` of a single weights file; a job with the wrong digest fails with the reason and
both digests."""

from __future__ import annotations

import hashlib

import pytest

from ascendbench.errors import WeightsDigestError
from ascendbench.models.sources import check_digest, files_digest, resolve_source

from helpers import TINY_RUN, read_record

WRONG = "sha256:" + "0" * 64


@pytest.fixture
def one_file(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"weights")
    return path


def _loaded(path):
    return {"kind": "loaded", "source": str(path), "digest": files_digest((path,)),
            "files": [path.name]}


def test_no_expectation_checks_nothing():
    assert check_digest(None, {"kind": "random-init"}) == {}


def test_the_records_digest_or_the_files_sha256sum_match(one_file):
    weights = _loaded(one_file)
    upper = check_digest(weights["digest"].upper(), weights)
    assert upper["digest_check"] == "match: weights.digest"
    plain = hashlib.sha256(b"weights").hexdigest()
    assert plain not in weights["digest"], "the record's digest also covers the file name"
    assert check_digest(plain, {**weights, "source": str(one_file.parent)}) == {
        "expected_digest": plain, "digest_check": "match: sha256sum of model.safetensors"}


def test_a_different_digest_names_the_key_both_digests_and_the_fix(one_file):
    weights = _loaded(one_file)
    with pytest.raises(WeightsDigestError) as caught:
        check_digest("a" * 64, weights)
    text = str(caught.value)
    assert f"model.expect_digest={'a' * 64} does not match" in text and weights["digest"] in text
    assert hashlib.sha256(b"weights").hexdigest() in text, "the sha256sum is shown too"
    assert f"`model.expect_digest={weights['digest']}`" in text
    assert "model.expect_digest=null" in text
    assert caught.value.reason == "weights_digest_mismatch"


def test_random_weights_never_pass_a_digest_check():
    with pytest.raises(WeightsDigestError, match="no weights were loaded"):
        check_digest(WRONG, {"kind": "random-init", "reason": "model.weights=random"})


def test_a_job_runs_with_the_right_digest_and_fails_with_a_wrong_one(cli, tiny_flux2_dir, tmp_path):
    digest = files_digest(resolve_source(str(tiny_flux2_dir)).files)
    base = ["model=tiny_flux2_decoder", f"model.source={tiny_flux2_dir}", "model.weights=required",
            *TINY_RUN,
            "baseline.enabled=false", "compare.visual.enabled=false", "artifacts.media=false",
            # the saved tiny model is untrained: its decoded image is noise by the spectral rule
            # (loaded weights are judged); this test is about the digest, so that rule is relaxed
            "+model.thresholds.output_spectral_exponent="
            "{min: 0.0, source: 'test: an untrained tiny model'}"]
    good, job = cli(*base, f"model.expect_digest={digest}", job_dir=tmp_path / "good")
    assert good.returncode == 0, good.output[-2000:]
    weights = read_record(job)["weights"]
    assert weights["digest"] == digest and weights["digest_check"] == "match: weights.digest"
    files = sorted(resolve_source(str(tiny_flux2_dir)).files)
    assert weights["sha256sum"] == [f"{hashlib.sha256(f.read_bytes()).hexdigest()}  "
                                    f"{f.name}" for f in files], \
        "each file's own sha256sum, as the sha256sum tool prints it"
    assert weights["file_bytes"] == [f.stat().st_size for f in files]

    bad, job = cli(*base, f"model.expect_digest={WRONG}", job_dir=tmp_path / "bad")
    assert bad.returncode == 1
    record = read_record(job)
    assert record["status"] == "failed" and record["error"]["reason"] == "weights_digest_mismatch"
    assert WRONG in record["error"]["message"] and digest in record["error"]["message"]
    assert record["weights"]["digest"] == digest, "the digest found is in the failed record"
    assert f"model.expect_digest={WRONG} does not match" in bad.output
