"""words.yaml, the report's fixed phrases: each key once (YAML keeps the last of duplicates
silently), each in English and Chinese."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import yaml

from ascendbench.report import fmt


def test_every_phrase_is_defined_once_in_both_languages():
    text = (Path(fmt.__file__).parent / "words.yaml").read_text()
    keys = [line.split(":", 1)[0] for line in text.splitlines()
            if line and not line.startswith(("#", " ")) and ":" in line]
    assert [k for k, n in Counter(keys).items() if n > 1] == []
    words = yaml.safe_load(text)
    assert all(isinstance(v, list) and len(v) == 2 and all(v) for v in words.values())
