"""``warp`` v2 on a level-1 stream: people are drawn from their appearance references at
their decoded boxes over the keyframe plate."""

from __future__ import annotations

import numpy as np
import pytest
from semc_streams import synthetic_frames, synthetic_stream

from semcodec.codec.bitstream import SubStream, SubStreamType, Unit
from semcodec.codec.reconstruct import create_reconstructor
from semcodec.codec.scaffold.codec import PayloadError, ScaffoldDecoder, StreamStructureError


def _decode(header, units):
    decoder, warp = ScaffoldDecoder(header), create_reconstructor("warp")
    out = []
    for unit in units:
        decoded = decoder.decode_unit(unit)
        if decoded is None:
            break
        out.append((decoded, warp.reconstruct(decoded)))
    decoder.finish()
    return out


def test_people_are_drawn_from_their_references_where_their_boxes_go():
    size = (96, 64)
    header, units = synthetic_stream(level=1, count=5, size=size)
    frames = synthetic_frames(5, size)
    decoded = _decode(header, units)
    assert decoded[0][0].plate and sorted(decoded[0][0].appearances) == [1, 2]

    def inside(box):
        x1, y1, x2, y2 = box.astype(int)
        return slice(y1 + 2, y2 - 2), slice(x1 + 2, x2 - 2)

    first = decoded[0][0].scaffold.tracks
    colour = {int(i): frames[0][inside(b)].mean((0, 1))
              for b, i in zip(first.boxes, first.ids, strict=True)}  # fmt: skip
    for frame, image in decoded[:3]:  # frame 4 is the next keyframe, with new references
        people = frame.scaffold.tracks
        for box, track_id in zip(people.boxes, people.ids, strict=True):
            # the reference of frame 1 (the rectangle's colour then), drawn at today's box
            drawn = image[inside(box)].reshape(-1, 3).mean(0)
            assert np.abs(drawn - colour[int(track_id)]).max() < 25


def test_an_appearance_reference_for_an_unknown_track_is_a_payload_error():
    header, units = synthetic_stream(level=1, count=2, size=(96, 64))
    first = units[0]
    subs = [s for s in first.substreams if s.type != SubStreamType.APPEARANCE]
    bad = SubStream(SubStreamType.APPEARANCE, b"\x01\x09\x02ab")  # track 9 has no box
    with pytest.raises(PayloadError, match="track 9"):
        _decode(header, [Unit(first.kind, first.seq, (*subs, bad)), *units[1:]])


def test_appearance_in_a_stream_whose_level_sends_none_is_a_structure_error():
    header, units = synthetic_stream(level=2, count=2, size=(96, 64))
    first = units[0]
    extra = SubStream(SubStreamType.APPEARANCE, b"\x00")
    with pytest.raises(StreamStructureError, match="unexpected.*APPEARANCE"):
        _decode(header, [Unit(first.kind, first.seq, (*first.substreams, extra)), *units[1:]])
