"""The camera profile: the detector's window layout chosen from a camera's own frames."""

from __future__ import annotations

import dataclasses

import cv2
import numpy as np
import pytest

from semcodec.codec.scaffold.detector import suppress_contained
from semcodec.codec.scaffold.profile import (
    CameraProfile,
    choose_profile,
    profile_frame_indices,
    window_fraction,
)


@pytest.fixture(scope="module")
def person_detector():
    from semcodec.codec.scaffold.detector import PersonDetector

    return PersonDetector(threads=1)


def zoomed(frames: np.ndarray, zoom: float) -> np.ndarray:
    """A closer camera: the central 1/zoom of each frame, resized back to the frame size."""
    from semcodec.evaluation.data.camera import CameraTransform

    return CameraTransform(zoom=zoom, y=0.55).frames(frames)


def test_window_fraction_known_values():
    assert window_fraction(1) == 1.0
    assert window_fraction(2) == pytest.approx(1 / 1.75)
    assert window_fraction(3, overlap=0.0) == pytest.approx(1 / 3)


def test_profile_frames_are_spread_and_bounded():
    assert profile_frame_indices(0) == []
    assert profile_frame_indices(3) == [0, 1, 2]
    picked = profile_frame_indices(100, limit=8)
    assert len(picked) == 8 and picked[0] == 0 and picked[-1] == 99


def test_frames_text_is_short_for_the_even_spread_only():
    from semcodec.codec.scaffold.profile import frames_text

    assert frames_text(profile_frame_indices(28)) == "0-27/8"  # 0 4 8 12 15 19 23 27
    assert frames_text([0, 5, 9]) == "0 5 9" and frames_text([]) == ""
    assert frames_text([2, 3]) == "2 3"


def test_small_people_choose_tiles(sample_frames, person_detector):
    """The sample (PETS09-S2L1 at 384x288: people about 0.16 of the frame tall) -> 2x2."""
    profile = choose_profile(sample_frames, person_detector)
    assert profile.tiles == 2
    assert profile.people > 0 and 0.08 < profile.person_height < 0.25
    assert "2x2 tiles" in profile.describe()


def test_large_people_choose_one_window(sample_frames, person_detector):
    """The same scene seen 3x closer: people about half the frame tall -> one window."""
    profile = choose_profile(zoomed(sample_frames, 3.0), person_detector)
    assert profile.tiles == 1
    assert profile.person_height > 0.3


def test_nobody_seen_defaults_to_tiles(person_detector):
    frames = np.full((4, 240, 320, 3), 128, np.uint8)
    profile = choose_profile(frames, person_detector)
    assert profile == CameraProfile(tiles=2, frames=(0, 1, 2, 3))
    assert "nobody seen" in profile.describe()


def test_parts_inside_a_taller_person_are_dropped():
    boxes = np.array([[100, 100, 150, 300],   # a whole person
                      [105, 100, 145, 160],   # their head and shoulders (a tile's view)
                      [300, 100, 350, 300],   # another person
                      [305, 110, 345, 170]],  # a part scoring higher than its container
                     np.float32)  # fmt: skip
    scores = np.array([0.8, 0.7, 0.5, 0.9], np.float32)
    assert suppress_contained(boxes, scores, 0.8).tolist() == [0, 2, 3]
    assert suppress_contained(boxes, scores, 0.0).tolist() == [0, 1, 2, 3]


def test_side_by_side_people_are_kept():
    boxes = np.array([[100, 100, 150, 300], [120, 110, 170, 300]], np.float32)
    assert suppress_contained(boxes, np.array([0.9, 0.6]), 0.8).tolist() == [0, 1]


def test_level1_header_records_the_chosen_layout(sample_frames):
    from semcodec.codec.scaffold.codec import ScaffoldDecoder, encode_frames
    from semcodec.codec.scaffold.levels import level_config

    frames = sample_frames[:6]
    header, units, stats = encode_frames(iter(frames), level_config(1), 7.0, (384, 288), 6)
    assert header.settings["detector_tiles"] == "2"
    assert header.settings["profile_frames"] == "0-5/6"  # 6 frames spread over 0..5
    assert float(header.settings["profile_person_height"]) > 0
    assert "2x2 tiles" in stats.profile
    # a clip of known length: no plate refinement (it ends before tiles pay back)
    assert header.settings["plate_refine"] == "0.0"
    # a live stream of small people: refined, said in the header; the share is the first
    # plate's rule over a plate period: people cover 2.1 % of the frame and are sent
    # 1 + (300 / 7 s) / 4 s times a period: 0.979 / (0.979 + 0.021 * 11.7) = 0.80, held to 0.5
    live, _, live_stats = encode_frames(iter(frames), level_config(1), 7.0, (384, 288))
    assert "people cover 2.1% of the frame" in live_stats.profile
    assert live.settings["plate_refine"] == "0.5"
    assert "plate refinement 0.5 of the target" in live_stats.profile
    decoder = ScaffoldDecoder(header)
    for unit in units:
        decoder.decode_unit(unit)
    decoder.finish()


def test_a_fixed_layout_is_kept(sample_frames):
    from semcodec.codec.scaffold.codec import encode_frames
    from semcodec.codec.scaffold.levels import level_config

    config = level_config(1, detector_tiles=1)
    header, _, stats = encode_frames(iter(sample_frames[:3]), config, 7.0, (384, 288), 3)
    assert header.settings["detector_tiles"] == "1"
    assert "profile_frames" not in header.settings and stats.profile == ""
    live = [encode_frames(iter(sample_frames[:3]), level_config(1, **options), 7.0,
                          (384, 288))[0].settings["plate_refine"]
            for options in ({"detector_tiles": 1}, {"detector_tiles": 2},
                            {"detector_tiles": 1, "plate_refine": 0.1})]  # fmt: skip
    # live streams: one window, no refinement; tiles, the small people's share; a share given
    assert live == ["0.0", "0.25", "0.1"]


def test_large_people_leave_the_plate_unrefined(sample_frames):
    """The sample seen 3x closer, live: one window is chosen, and with it no plate
    refinement (the bytes go to the large people's references)."""
    from semcodec.codec.scaffold.codec import encode_frames
    from semcodec.codec.scaffold.levels import level_config

    frames = zoomed(sample_frames[:6], 3.0)
    header, _, stats = encode_frames(iter(frames), level_config(1), 7.0, (384, 288))  # live
    assert header.settings["detector_tiles"] == "1"
    assert header.settings["plate_refine"] == "0.0"
    assert "plate refinement 0 of the target" in stats.profile


def test_plate_refine_per_camera_is_the_only_negative_share():
    from semcodec.codec.scaffold.levels import PLATE_REFINE_PER_CAMERA, level_config

    assert level_config(1).plate_refine == PLATE_REFINE_PER_CAMERA
    with pytest.raises(ValueError, match="plate_refine"):
        level_config(1, plate_refine=-0.5)


def test_rate_over_a_two_second_clip(sample_frames):
    """A 2-s clip (50 frames at 25 fps, 640x480) lands within 10 % of level 1's target,
    header included; shorter than a window, it is its own window (units only)."""
    from semcodec.codec.bitstream import unit_overhead_bytes
    from semcodec.codec.core.sources import open_source, sample_path
    from semcodec.codec.scaffold.codec import encode_frames
    from semcodec.codec.scaffold.levels import level_config
    from semcodec.codec.scaffold.rate import window_rates

    frames = open_source(sample_path()).read(start=1, count=50)
    frames = np.stack([cv2.resize(f, (640, 480), interpolation=cv2.INTER_CUBIC) for f in frames])
    header, units, stats = encode_frames(iter(frames), level_config(1), 25.0, (640, 480), 50)
    sizes = [u.payload_bytes + unit_overhead_bytes(u) for u in units]
    frame_bytes = 0.004 * 640 * 480 / 8
    total = len(header.to_bytes()) + sum(sizes)
    assert 0.9 <= total / (50 * frame_bytes) <= 1.1
    low, high = window_rates(sizes[:-1], 25.0, frame_bytes)
    assert low == high == pytest.approx(sum(sizes[:-1]) / (50 * frame_bytes))
    assert 0.85 <= low <= 1.1


def test_level1_chooses_the_layout_again_after_a_scene_cut(sample_dir):
    """20 frames of small people (2x2 tiles), then a cut to the same scene 3x closer: 4 s
    after the cut the tracker's detector works on one window."""
    from semcodec.codec.core.sources import open_source
    from semcodec.codec.scaffold.codec import ScaffoldEncoder
    from semcodec.codec.scaffold.levels import level_config

    sample = open_source(sample_dir).read(start=1, count=50)
    frames = np.concatenate([sample[:20], zoomed(sample[:30], 3.0)])
    encoder = ScaffoldEncoder(level_config(1), (384, 288), 7.0, expected_frames=len(frames))
    tiles = []
    for frame in encoder.start(iter(frames)):
        unit, _ = encoder.encode_frame(frame)
        tiles.append(encoder._people.detector.config.tiles)  # noqa: SLF001
    assert tiles[:20] == [2] * 20 and tiles[-1] == 1
    assert tiles.index(1) == 20 + 27  # the 28th frame after the cut (4 s at 7 fps)
    assert encoder.header(len(frames)).settings["detector_tiles"] == "2"  # the start-up choice
    assert "after the scene cut at frame 21: whole frame" in encoder.stats.profile


def test_a_live_stream_of_small_people_refines_its_plate_after_the_first_window(sample_dir):
    """Level 1's default on a live stream of the sample (small people: tiles): plate tiles
    start once the first 10-second window (70 frames at 7 fps) has passed, and a decoder
    of the header takes them."""
    from semcodec.codec.bitstream import SubStreamType, Unit
    from semcodec.codec.core.sources import open_source
    from semcodec.codec.scaffold.codec import ScaffoldDecoder, encode_frames
    from semcodec.codec.scaffold.levels import level_config

    sample = open_source(sample_dir).read(start=1, count=60)
    frames = np.concatenate([sample, sample[::-1]])  # 120 frames, no cut
    header, units, stats = encode_frames(iter(frames), level_config(1), 7.0, (384, 288))
    assert header.settings["plate_refine"] == "0.5"  # the first plate's rule over a period
    tiled = [u.seq for u in units if SubStreamType.PLATE_TILE in {s.type for s in u.substreams}]
    assert tiled and min(tiled) >= 70 and stats.plate_tiles == len(tiled)
    decoder = ScaffoldDecoder(header)
    for unit in units:
        decoder.decode_unit(Unit.from_bytes(unit.to_bytes(), seq=unit.seq))
    decoder.finish()


def test_a_clip_is_refined_only_when_a_plate_period_follows_its_first_window():
    """Tiles start after the first 10-s window (70 frames at 7 fps) and pay back over a plate
    period (level 1: 300 frames): a clip of 370 frames is refined, one of 369 is not."""
    from semcodec.codec.scaffold.codec import ScaffoldEncoder
    from semcodec.codec.scaffold.levels import level_config

    config = level_config(1, detector_tiles=2)
    shares = [ScaffoldEncoder(config, (384, 288), 7.0, expected_frames=n).config.plate_refine
              for n in (0, 369, 370)]  # fmt: skip
    assert shares == [0.25, 0.0, 0.25]
    no_period = level_config(1, detector_tiles=2, keyframe_interval=0)  # one more window then
    shares = [ScaffoldEncoder(no_period, (384, 288), 7.0, expected_frames=n).config.plate_refine
              for n in (139, 140)]  # fmt: skip
    assert shares == [0.0, 0.25]


def _seen(*frames):
    """Per frame, :class:`Detections` of ``(x1, y1, x2, y2, score)`` tuples."""
    from semcodec.codec.scaffold.detector import Detections

    out = []
    for boxes in frames:
        rows = sorted(boxes, key=lambda b: -b[4])
        array = np.array([b[:4] for b in rows], np.float32).reshape(-1, 4)
        out.append(Detections(array, np.array([b[4] for b in rows], np.float32)))
    return out


SMALL, LARGE = (10, 10, 20, 40), (100, 20, 140, 120)


def test_the_layout_that_finds_more_people_wins_a_sign_test():
    """Two people per frame: the tiles find both (0.8), the whole frame finds the large one
    and sees the small one only at 0.35 (it confirms, it does not find). On 6 frames the
    tiles' 6 people against none is a sign test passed (6 >= 2 sqrt(6)); on 2 frames (2 <
    2 sqrt(2)) the height rule's layout is kept."""
    from semcodec.codec.scaffold.profile import choose_by_agreement

    whole = [[(*LARGE, 0.9), (*SMALL, 0.35)]]
    tiles = [[(*LARGE, 0.85), (*SMALL, 0.8)]]
    assert choose_by_agreement(1, _seen(*whole * 6), 2, _seen(*tiles * 6), 0.4, 0.3) == (
        2, 12, (6, 12))
    assert choose_by_agreement(1, _seen(*whole * 2), 2, _seen(*tiles * 2), 0.4, 0.3) == (
        1, 4, (2, 4))
    # the height rule's layout finding more keeps it, whatever the order of the two
    assert choose_by_agreement(2, _seen(*tiles * 6), 1, _seen(*whole * 6), 0.4, 0.3)[0] == 2


def test_a_box_only_one_layout_sees_is_no_evidence():
    """A tile's confident box the whole frame has nothing at (a part, a false alarm, or a
    person it cannot see) is not among the people: it cannot win the tiles the choice."""
    from semcodec.codec.scaffold.profile import choose_by_agreement

    whole = _seen(*[[(*LARGE, 0.9)]] * 8)
    tiles = _seen(*[[(*LARGE, 0.9), (105, 25, 135, 60, 0.95)]] * 8)
    assert choose_by_agreement(1, whole, 2, tiles) == (1, 8, (8, 8))
    with pytest.raises(ValueError, match="need the same"):
        choose_by_agreement(1, whole, 2, tiles[:3])


def test_the_profile_by_agreement_says_what_it_chose(sample_frames, person_detector):
    """On the sample (small people: 2x2 by the height rule) the agreement keeps 2x2 and the
    profile says what each layout found; the height rule alone (level 1) adds no entry."""
    height = choose_profile(sample_frames, person_detector)
    agreed = choose_profile(sample_frames, person_detector, by_agreement=True,
                            agreement_score=0.4)  # fmt: skip
    assert agreed.tiles == height.tiles == 2 and agreed.height_tiles == 2
    assert dict(agreed.found)[2] >= dict(agreed.found)[1] and agreed.union > 0
    assert "by agreement: of" in agreed.describe() and "as the height rule" in agreed.describe()
    assert "profile_found" in agreed.to_settings()
    assert "profile_found" not in height.to_settings() and "agreement" not in height.describe()
    flipped = dataclasses.replace(agreed, tiles=1, height_tiles=2)
    assert "over the height rule's 2x2 tiles, by a sign test" in flipped.describe()


def test_people_per_frame_counts_each_person_once():
    box = np.array([0.0, 0.0, 10.0, 30.0])
    samples = ((0, box), (0, box + 20), (3, box))  # 2 people on frame 0, 1 on frame 3
    profile = CameraProfile(tiles=1, people=6, frames=(0, 3), samples=samples)
    assert profile.people_per_frame == 1.5  # not 6 boxes (each a box of both views) / 2
    assert dataclasses.replace(profile, samples=()).people_per_frame == 1.5  # half the boxes
    assert CameraProfile(tiles=1).people_per_frame == 0.0
