"""The codec interface: settings, registry, curves."""

from __future__ import annotations

import pytest

from semcodec.evaluation.codecs.base import (
    Setting,
    SettingError,
    UnknownCodecError,
    available_codecs,
    create_codec,
    register_codec,
)


def test_setting_parse_and_label_round_trip():
    s = Setting.parse(" crf=28 , scale=0.5")
    assert s.params == (("crf", "28"), ("scale", "0.5"))
    assert str(s) == "crf=28,scale=0.5"
    assert Setting.parse(str(s)) == s
    assert s.number("crf") == 28.0
    assert s.number("qp", 7) == 7
    assert Setting.of(crf=23.0, scale=0.5) == Setting.parse("crf=23,scale=0.5")


@pytest.mark.parametrize("text", ["crf", "crf=", "=3", "crf=1,crf=2"])
def test_bad_settings_raise(text):
    with pytest.raises(SettingError):
        Setting.parse(text)


def test_non_numeric_value_raises_when_read_as_number():
    with pytest.raises(SettingError, match="not a number"):
        Setting.parse("crf=abc").number("crf")


def test_registry_has_the_baselines_and_rejects_unknown_and_duplicates():
    assert {"x264", "x265", "jpeg", "webp", "raw"} <= set(available_codecs())
    with pytest.raises(UnknownCodecError, match="available: .*x264"):
        create_codec("nope")
    with pytest.raises(ValueError, match="already registered"):
        register_codec("x264")(type(create_codec("raw")))


def test_curve_names_group_settings_by_everything_but_quality():
    x264 = create_codec("x264")
    assert x264.curve_of(Setting.parse("crf=23")) == "x264"
    assert x264.curve_of(Setting.parse("crf=23,scale=1")) == "x264"
    assert x264.curve_of(Setting.parse("crf=30,scale=0.5")) == "x264@scale=0.5"


def test_scales_apply_to_codecs_that_take_them_only():
    from semcodec.evaluation.bench.grid import expand_settings
    from semcodec.evaluation.codecs.base import create_codec

    scaled = expand_settings(create_codec("x265"), ["crf=40"], (1.0, 0.5))
    assert [str(s) for s in scaled] == ["crf=40", "crf=40,scale=0.5"]
    assert [str(s) for s in expand_settings(create_codec("scaffold"), ["level=1"], (1.0, 0.5))
            ] == ["level=1"]  # fmt: skip


def test_a_new_default_decoder_measures_scaffold_cells_again():
    """A setting without ``decoder=`` is decoded by the default decoder: the cell's version
    names it, so a grid run with another default does not resume the old cell."""
    from semcodec.evaluation.codecs.scaffold import ScaffoldCodec

    default, warp = ScaffoldCodec().describe(), ScaffoldCodec(decoder="warp").describe()
    assert default["encoder_version"] != warp["encoder_version"]
    assert "default decoder warp" in warp["encoder_version"]
