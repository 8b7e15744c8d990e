"""References coded against the plate (issue 51, Deliver 3: cheaper references): a new
person's first reference predicted from the plate under their box decodes to the edge's copy
bit for bit (also when the cloud upscales its plate otherwise), costs fewer bytes than the
whole WebP at its PSNR, and a malformed or unexpected plate-coded entry is refused."""

from __future__ import annotations

import numpy as np
import pytest

from semcodec.codec.core.types import Tracks
from semcodec.codec.scaffold.appearance import (
    INTRA_CODE,
    MAX_INTER_QP,
    PLATE_CODE,
    AppearanceError,
    AppearanceSelector,
    decode_entry,
    encode_ref,
    inter_entry,
    intra_entry,
    pack_refs,
    unpack_refs,
)
from semcodec.codec.scaffold.interref import plate_region, psnr


def _scene(person: bool) -> np.ndarray:
    """A ``(120, 160, 3)`` textured background, with a person in ``[50, 10, 90, 106]``."""
    yy, xx = np.mgrid[0:120, 0:160]
    frame = np.stack([100 + 50 * np.sin(xx / 4.0), 110 + 40 * np.cos(yy / 3.0),
                      90 + 30 * np.sin((xx + yy) / 6.0)], -1)  # fmt: skip
    if person:
        frame[20:100, 60:80] = (40, 40, 70)  # a coat, narrower than the box
        frame[12:24, 64:76] = (200, 160, 130)  # a head
    return np.clip(frame, 0, 255).astype(np.uint8)


def _tracks(box, tid=1) -> Tracks:
    return Tracks(np.asarray([box], np.float32), np.ones(1, np.float32),
                  np.asarray([tid], np.int32))  # fmt: skip


BOX = [50, 10, 90, 106]


def test_a_first_reference_against_the_plate_is_cheaper_and_what_the_decoder_holds():
    plate = _scene(False)
    selector = AppearanceSelector(quality=30, refresh_frames=100, inter=True, from_plate=True)
    sent = selector.select(_scene(True), 1, _tracks(BOX), budget_bytes=None, plate=plate)
    entry = sent[1]
    assert PLATE_CODE <= entry[0] <= PLATE_CODE + MAX_INTER_QP and selector.plate_refs == 1
    refs = unpack_refs(pack_refs(sent), [1], {}, under=lambda t: plate_region(plate, BOX))
    picture = selector._refs[1].picture
    assert np.array_equal(refs[1], picture)
    # fewer bytes than the whole WebP it replaces, at its PSNR or better
    crop = _scene(True)[10:106, 50:90]
    webp = intra_entry(encode_ref(crop, 30))
    assert len(entry) < len(webp)
    assert psnr(crop, picture) >= psnr(crop, decode_entry(webp, None)) - 1e-9


def test_without_a_plate_or_the_setting_a_first_reference_is_a_whole_webp():
    frame = _scene(True)
    for selector, plate in ((AppearanceSelector(30, 100, inter=True), _scene(False)),
                            (AppearanceSelector(30, 100, inter=True, from_plate=True), None)):
        assert selector.select(frame, 1, _tracks(BOX), None, plate=plate)[1][0] == INTRA_CODE
    with pytest.raises(ValueError, match="needs inter"):
        AppearanceSelector(30, 100, from_plate=True)


def test_plate_region_repeats_the_edge_and_is_bounded():
    plate = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
    part = plate_region(plate, np.array([-2.2, 1.0, 3.0, 5.4]))
    assert part.shape == (4, 5, 3)  # x -2..2, y 1..4 (rows past the bottom repeat the last)
    assert np.array_equal(part[:, 0], plate[[1, 2, 3, 3], 0])
    assert np.array_equal(part[-1], part[-2])
    huge = plate_region(plate, np.array([-1e9, -1e9, 1e9, 1e9]))
    assert huge.shape == plate.shape  # no larger than the plate, whatever the box


def test_bad_plate_coded_entries_are_refused():
    plate = _scene(False)
    selector = AppearanceSelector(quality=30, refresh_frames=100, inter=True, from_plate=True)
    entry = selector.select(_scene(True), 1, _tracks(BOX), None, plate=plate)[1]
    with pytest.raises(AppearanceError, match="without them"):
        decode_entry(entry, None)  # a stream without appearance_plate
    with pytest.raises(AppearanceError, match="without them"):
        unpack_refs(pack_refs({1: entry}), [1], {})
    with pytest.raises(AppearanceError, match="unknown code"):
        decode_entry(bytes([PLATE_CODE + MAX_INTER_QP + 1]) + entry[1:], None, under=lambda: plate)
    too_tall = inter_entry(30, (40, 1000), b"\x02\x01\x00", from_plate=True)
    with pytest.raises(AppearanceError):
        decode_entry(too_tall, None, under=lambda: plate_region(plate, BOX))


def test_the_setting_needs_inter_coded_references():
    from semcodec.codec.scaffold.levels import level_config

    with pytest.raises(ValueError, match="needs appearance_inter"):
        level_config(1, appearance_inter=False, appearance_plate=True)
    assert "appearance_plate" not in level_config(1, appearance_plate=False).to_dict()
