"""A decoder ladder in the benchmark: cells that differ only in their decoder decode the
same bytes, encoded once; any other change to the setting encodes anew."""

from __future__ import annotations

from semcodec.evaluation.bench import grid as bench
from semcodec.evaluation.codecs.base import Setting, create_codec
from semcodec.evaluation.codecs.scaffold import ScaffoldCodec


def test_decoder_keys_are_not_part_of_the_stream_setting():
    scaffold = create_codec("scaffold")
    setting = Setting.parse("level=1,target_bpp=0.002,decoder=warp,smooth_s=0")
    assert str(scaffold.stream_setting(setting)) == "level=1,target_bpp=0.002"
    x265 = create_codec("x265")
    assert x265.stream_setting(Setting.parse("crf=40,scale=0.5")) == Setting.parse(
        "crf=40,scale=0.5")  # fmt: skip


def test_a_ladder_of_decoders_shares_one_encoding(tmp_path, monkeypatch):
    from semcodec.codec.core.sources import sample_path

    encoded_settings = []
    encode = ScaffoldCodec.encode

    def counted(self, frames, setting, fps, **kwargs):
        encoded_settings.append(str(setting))
        return encode(self, frames, setting, fps, **kwargs)

    monkeypatch.setattr(ScaffoldCodec, "encode", counted)
    monkeypatch.setattr(bench, "_ENCODINGS", type(bench._ENCODINGS)())
    config = bench.GridConfig(
        sequences=[str(sample_path())], out_dir=tmp_path, frames=6, metrics=("psnr",),
        codecs={"scaffold": ["level=1,decoder=warp", "level=1,decoder=warp,smooth_s=0",
                             "level=1,decoder=warp,appearance_quality=90"]})  # fmt: skip
    rows = bench.run_grid(config, progress=False)
    assert encoded_settings == ["level=1,decoder=warp",
                                "level=1,decoder=warp,appearance_quality=90"]
    first, smooth, other = rows
    assert first["bytes"] == smooth["bytes"] and first["bytes"] != other["bytes"]
    assert (first["setting"], smooth["setting"]) == ("level=1,decoder=warp",
                                                    "level=1,decoder=warp,smooth_s=0")
    assert first["psnr"] != smooth["psnr"]  # each decoded by its own decoder
