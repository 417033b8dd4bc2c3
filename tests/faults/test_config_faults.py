"""Configuration faults: unknown option, misspelled key, value of the wrong type."""

from __future__ import annotations


def test_unknown_option_lists_the_options_and_writes_nothing(app, fast):
    code, console, job = app("model=tiny_flux2_decodr", *fast)
    assert code == 1
    assert "Could not find 'model/tiny_flux2_decodr'" in console
    assert "Available options in 'model'" in console and "tiny_flux2_decoder" in console
    assert "Traceback" not in console
    assert not job.exists(), "a config that does not compose runs no job and writes no record"


def test_misspelled_key_is_named_with_its_full_key(app, fast):
    code, console, job = app("model=tiny_flux2_decoder", "preset.heigth=64", *fast)
    assert code == 1
    assert (
        "Could not override 'preset.heigth'" in console
        and "Key 'heigth' not in 'PresetConfig'" in console
    )
    assert "full_key: preset.heigth" in console
    assert "Traceback" not in console and not job.exists()


def test_wrong_value_type_names_key_value_and_expected_type(app, fast):
    """Typed schemas reject a wrong type at compose time: no job dir, no record, Hydra names the
    key."""
    for override, words in (
        ("preset.height=abc", "Value 'abc' of type 'str' could not be converted to Integer"),
        ("seed=x", "Value 'x' of type 'str' could not be converted to Integer"),
        ("model.weights=maybe", "Invalid value 'maybe', expected one of [auto, required, random]"),
    ):
        code, console, job = app("model=tiny_flux2_decoder", *fast, override)
        key = override.split("=")[0]
        assert code == 1 and words in console and f"full_key: {key}" in console, console
        assert "Traceback" not in console and not job.exists(), "rejected before a job dir exists"
