"""``model.expect_digest``: refuse weights whose digest is not the one expected.

Two spellings are accepted, so that a digest can be copied from either place a user finds one:

* ``sha256:<hex>``: the record's ``weights.digest`` (SHA256 over the names and bytes of the weight files,
  or over the tensors a layer loader read), compared as is;
* ``<hex>`` (64 hex digits, what ``sha256sum`` prints): also matches the plain SHA256 of the file when the
  weights came from exactly one file (the VideoFlexTok seed checked its checkpoint this way).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Mapping

from ascendbench.errors import WeightsDigestError

_HEX = re.compile(r"^[0-9a-f]{64}$")
_CHUNK = 1 << 24


def check_digest(expected: str | None, weights: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``weights`` (the record's section) against ``expected``; the facts to add to that section.

    Returns:
        ``{}`` when ``expected`` is ``None``, else ``{"expected_digest", "digest_check"}`` (what matched).

    Raises:
        WeightsDigestError: random-init weights, or a digest that differs (the message names both).
    """
    if expected is None:
        return {}
    wanted = str(expected).strip().lower()
    if weights.get("kind") != "loaded":
        raise WeightsDigestError(
            f"model.expect_digest={expected} is set but no weights were loaded ({weights.get('kind')}: "
            f"{weights.get('reason')}). Point model.source at the checkpoint with that digest and set "
            "`model.weights=required`, or drop the check with `model.expect_digest=null`.")
    actual = str(weights.get("digest") or "")
    if wanted == actual:
        return {"expected_digest": wanted, "digest_check": "match: weights.digest"}
    plain = _plain_file_sha256(weights) if _HEX.match(wanted) else None
    if plain is not None and wanted == plain[1]:
        return {"expected_digest": wanted, "digest_check": f"match: sha256sum of {plain[0].name}"}
    raise WeightsDigestError(_mismatch(expected, actual, weights, plain))


def _plain_file_sha256(weights: Mapping[str, Any]) -> tuple[Path, str] | None:
    """(the file, its SHA256 hex) when the weights came from exactly one file that is still there."""
    files, source = list(weights.get("files") or []), weights.get("source")
    if len(files) != 1 or not source:
        return None
    path = Path(source) if Path(source).is_file() else Path(source) / files[0]
    if not path.is_file():
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return path, digest.hexdigest()


def _mismatch(expected: str, actual: str, weights: Mapping[str, Any], plain: tuple[Path, str] | None) -> str:
    found = f"{actual}" + (f" (sha256sum of {plain[0].name}: {plain[1]})" if plain else "")
    return (
        f"model.expect_digest={expected} does not match the weights loaded from {weights.get('source')}: their "
        f"digest is {found}. The files changed, are incomplete, or are not the checkpoint expected: fetch it "
        "again (e.g. `huggingface-cli download <id> --local-dir <dir>`) and compare with `sha256sum`; if these "
        f"weights are the ones you want, set `model.expect_digest={actual}`, or `model.expect_digest=null` to "
        "skip the check.")
