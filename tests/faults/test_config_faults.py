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
    assert "Could not override 'preset.heigth'" in console and "Key 'heigth' is not in struct" in console
    assert "full_key: preset.heigth" in console and "+preset.heigth=64" in console
    assert "Traceback" not in console and not job.exists()


def test_wrong_value_type_names_key_value_and_expected_type(app, fast, record_of):
    code, console, job = app("model=tiny_flux2_decoder", *fast, "preset.height=abc", "seed=x")
    assert code == 1
    record = record_of(job)
    assert record["status"] == "failed" and record["error"]["reason"] == "config"
    message = record["error"]["message"]
    assert "preset.height='abc' must be an integer" in message and "seed='x' must be an integer" in message
    assert "conf/preset/mini.yaml has 256" in message
    assert message in console.replace("\n", " ") or "preset.height='abc'" in console
    assert "Traceback" not in console and "full log with traceback" in console
    assert record["weights"] is None, "nothing was loaded"
