"""Checked-in streams of every level decode to checked-in digests: the scaffolds exactly,
and the frames ``warp`` rebuilds from them bit for bit. A change of the bitstream, the
entropy coders or the decoder that alters any decoded value fails here (rebuild the
references with ``tests/data/streams/make_streams.py`` only when the change is meant)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

STREAMS = Path(__file__).resolve().parents[1] / "data" / "streams"
LEVELS = (0, 1, 2, 3)
FRAMES = 12


def _update(digest, value) -> None:
    """Feeds ``value`` (array, bytes, number, None, or a list/dict of them) into ``digest``,
    with shapes and dtypes, so that equal digests mean equal values."""
    if value is None:
        digest.update(b"none")
    elif isinstance(value, bytes):
        digest.update(len(value).to_bytes(8, "little") + value)
    elif isinstance(value, dict):
        for key in sorted(value):
            digest.update(str(key).encode())
            _update(digest, value[key])
    elif isinstance(value, list | tuple):
        digest.update(f"list{len(value)}".encode())
        for item in value:
            _update(digest, item)
    else:
        array = np.ascontiguousarray(value)
        digest.update(f"{array.dtype.str}{array.shape}".encode() + array.tobytes())


def _scaffold_fields(decoded) -> list:
    s = decoded.scaffold
    return [s.number, s.tracks.boxes, s.tracks.scores, s.tracks.ids,
            None if s.segmentation is None else s.segmentation.labels,
            [(p.track_id, p.keypoints, p.visibility) for p in s.poses],
            None if s.flow is None else s.flow.field, s.keyframe, s.appearances,
            decoded.keyframe_image, decoded.appearances, decoded.plate,
            decoded.plate_refresh]  # fmt: skip


def stream_digests(path: Path) -> dict:
    """``{"frames": n, "scaffolds": sha256, "warp": sha256}`` of a stream's decode."""
    from semcodec.codec.reconstruct import create_reconstructor
    from semcodec.codec.scaffold.codec import decode_stream

    scaffolds, frames, count = hashlib.sha256(), hashlib.sha256(), 0
    for decoded, image in decode_stream(path, create_reconstructor("warp")):
        _update(scaffolds, _scaffold_fields(decoded))
        _update(frames, image)
        count += 1
    return {"frames": count, "scaffolds": scaffolds.hexdigest(), "warp": frames.hexdigest()}


@pytest.mark.parametrize("level", LEVELS)
def test_reference_stream_decodes_to_its_digests(level):
    expected = json.loads((STREAMS / "digests.json").read_text())[f"level{level}.semc"]
    got = stream_digests(STREAMS / f"level{level}.semc")
    assert got["frames"] == FRAMES
    assert got["scaffolds"] == expected["scaffolds"], "decoded scaffolds differ"
    assert got["warp"] == expected["warp"], "scaffolds equal, warp's frames differ"


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("version", [3, 4])
def test_reference_stream_reframed_compactly_decodes_the_same(level, version, tmp_path):
    """The references are format-2 streams (old streams still decode); the same header and
    units written in format 3 or 4 decode to the same digests, in fewer bytes (format 4's
    framing smaller again: no index in frame units, a CRC-8 in short ones)."""
    import dataclasses

    from semcodec.codec.bitstream import read_stream, write_stream
    from semcodec.codec.bitstream.tables import level_defaults_id

    old = STREAMS / f"level{level}.semc"
    header, units = read_stream(old)
    units = list(units)
    assert header.version == 2
    compact = dataclasses.replace(header, version=version,
                                  defaults=level_defaults_id(level, dict(header.settings)))
    path = tmp_path / f"v{version}.semc"
    write_stream(path, compact, units)
    assert read_stream(path)[0].version == version and compact.defaults == level + 1
    assert path.stat().st_size < old.stat().st_size - 500  # the header alone was ~600 bytes
    if version == 4:
        assert path.stat().st_size <= old.stat().st_size - 500 - 8 * (len(units) - 2)
    expected = json.loads((STREAMS / "digests.json").read_text())[f"level{level}.semc"]
    got = stream_digests(path)
    assert (got["scaffolds"], got["warp"]) == (expected["scaffolds"], expected["warp"])
