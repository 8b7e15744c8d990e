"""The first window's budget split between the plate and the people (issue 51): the choice
by weighted distortion within the budget, the references' cost measured on the camera's own
people, the priority setting, and the stream that carries the choice."""

from __future__ import annotations

import numpy as np
import pytest

from semcodec.codec.scaffold.levels import level_config
from semcodec.codec.scaffold.plate.share import Split, choose_split, reference_points

# (share, bytes, error) of a plate; (quality, bytes, error) of a reference
PLATE = [(0.05, 100, 400.0), (0.1, 200, 200.0), (0.2, 400, 100.0), (0.5, 1000, 50.0)]
REFERENCE = [(10, 10.0, 300.0), (30, 20.0, 150.0), (60, 40.0, 60.0)]


def test_the_split_minimises_the_weighted_error_within_the_budget():
    # 10 references; budget 600 bytes; the people weighed as their area (a tenth)
    chosen = choose_split(PLATE, REFERENCE, attention=0.1, references=10, budget=600)
    # within 600: plate 400 + q10 (100) -> 0.9*100 + 0.1*300 = 120; plate 200 + q60 (400)
    # -> 0.9*200 + 0.1*60 = 186; plate 400 + q30 (200) -> 105; plate 100 + q60 -> 366
    assert chosen == Split(0.2, 30, 400, 20.0, 100.0, 150.0)
    # half the attention on people: plate 400 + q30 -> 50 + 75 = 125 still beats plate 200
    # + q60 -> 100 + 30 = 130; at 0.7 the people win: 60 + 42 = 102 against 30 + 105 = 135
    assert choose_split(PLATE, REFERENCE, 0.5, 10, 600).quality == 30
    people = choose_split(PLATE, REFERENCE, 0.7, 10, 600)
    assert (people.quality, people.plate_share) == (60, 0.1)


def test_the_attention_follows_the_priority():
    from semcodec.codec.scaffold.plate.share import people_attention

    assert people_attention("people", 0.03) == 0.5  # a viewer watches the people
    assert people_attention("people", 0.8) == 0.8  # at least their area
    assert people_attention("scene", 0.2) == pytest.approx(0.05)


def test_the_split_never_overspends_and_falls_back_to_the_smallest_when_nothing_fits():
    for budget in (200, 300, 700, 1500):
        for attention in (0.05, 0.2, 0.5, 0.9):
            chosen = choose_split(PLATE, REFERENCE, attention, 10, budget)
            assert chosen.plate_bytes + 10 * chosen.reference_bytes <= budget
    assert choose_split(PLATE, REFERENCE, 0.5, 10, 50) == Split(0.05, 10, 100, 10.0, 400.0,
                                                                 300.0)  # fmt: skip
    # more budget never buys a worse weighted error
    costs = []
    for budget in (200, 400, 800, 1600):
        c = choose_split(PLATE, REFERENCE, 0.5, 10, budget)
        costs.append(0.5 * c.plate_error + 0.5 * c.reference_error)
    assert costs == sorted(costs, reverse=True)


def test_reference_points_grow_in_bytes_and_shrink_in_error_with_quality(sample_frames):
    # a textured "person" box on the first frame (the sample's pixels there)
    samples = [(0, np.array([100.0, 60.0, 140.0, 160.0])), (3, np.array([200.0, 80.0,
                                                                         230.0, 170.0]))]
    points = reference_points(sample_frames, samples, qualities=(5, 30, 90))
    assert [q for q, _, _ in points] == [5, 30, 90]
    sizes, errors = [b for _, b, _ in points], [e for _, _, e in points]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]
    assert errors == sorted(errors, reverse=True) and errors[-1] < errors[0]


@pytest.mark.parametrize("level", [0, 2, 3])
def test_a_priority_is_refused_where_no_budget_is_split(level):
    with pytest.raises(ValueError, match="priority=scene needs a budget"):
        level_config(level, priority="scene")
    with pytest.raises(ValueError, match="priority=people needs a budget"):
        level_config(1, target_bpp=0.0, priority="people")


def test_an_unknown_priority_is_refused_and_the_header_keeps_a_chosen_one():
    from semcodec.codec.scaffold.levels import LevelConfig

    with pytest.raises(ValueError, match="priority must be one of people, balanced, scene"):
        level_config(1, priority="faces")
    assert "priority" not in level_config(1).to_dict()  # the default (balanced): omitted
    kept = level_config(1, priority="scene").to_dict()
    assert kept["priority"] == "scene"
    assert LevelConfig.from_dict(kept).priority == "scene"


def test_the_stream_carries_the_split_the_priority_chose(sample_dir):
    """On the sample at 0.004 BPP: the profile line says the split, the header's reference
    quality is the chosen one, and favouring the scene gives the first plate more than
    favouring the people (the references less)."""
    from semcodec.codec.core.sources import open_source
    from semcodec.codec.scaffold.codec import encode_frames
    from semcodec.codec.scaffold.levels import LevelConfig

    frames = open_source(sample_dir).read(start=1, count=40)
    size = (frames.shape[2], frames.shape[1])
    plate, quality = {}, {}
    for priority in ("people", "scene"):
        config = level_config(1, target_bpp=0.006, priority=priority)
        header, units, stats = encode_frames(frames, config, 7.0, size, num_frames=40)
        assert f"priority {priority}: first plate" in stats.profile
        chosen = LevelConfig.from_dict(dict(header.settings))
        assert f"WebP quality {chosen.appearance_quality} " in stats.profile
        plate[priority] = stats.stream_bytes["keyframe"]
        quality[priority] = chosen.appearance_quality
    assert plate["scene"] >= plate["people"]
    assert quality["scene"] <= quality["people"]


def test_the_default_keeps_the_pixels_share_and_the_levels_reference_quality(sample_dir):
    """balanced (the default) is the pixel rule: the first plate's share of the pixels each
    part sends, the references at the level's quality (no error-per-byte choice)."""
    from semcodec.codec.core.sources import open_source
    from semcodec.codec.scaffold.codec import encode_frames
    from semcodec.codec.scaffold.levels import LevelConfig

    frames = open_source(sample_dir).read(start=1, count=20)
    size = (frames.shape[2], frames.shape[1])
    header, _, stats = encode_frames(frames, level_config(1), 7.0, size, num_frames=20)
    assert "priority" not in stats.profile and "first plate 0.50 of the first" in stats.profile
    assert LevelConfig.from_dict(dict(header.settings)).appearance_quality == 30
