"""The sparse pose coder (level 1's 13 box-relative joints): exact round trips, the
prediction from the previous decoded pose, the bytes it costs, hostile payloads refused."""

from __future__ import annotations

import numpy as np
import pytest

from semcodec.codec.core.types import BODY_JOINTS, NUM_KEYPOINTS
from semcodec.codec.entropy.rans import EntropyCodingError
from semcodec.codec.entropy.sparse_pose import (
    MAX_POSES,
    MAX_REACH,
    TEMPLATE,
    SparsePose,
    SparsePoseCoder,
)


def walker(frame: int, x: float, height: float = 100.0, jitter: float = 0.0, seed: int = 0):
    """``(box (4,), keypoints (33, 2), visibility (33,))`` of a person ``height`` px tall
    walking right 3 px a frame from ``x``, legs and arms swinging."""
    rng = np.random.default_rng(seed * 1000 + frame)
    box = np.array([x + 3 * frame, 50.0, x + 3 * frame + 0.4 * height, 50.0 + height])
    uv = TEMPLATE.copy()
    swing = 0.08 * np.sin(frame / 3)
    uv[[9, 11], 0] += swing  # left knee and ankle
    uv[[10, 12], 0] -= swing
    uv[[5, 6], 0] -= swing, -swing  # wrists
    kp = np.zeros((NUM_KEYPOINTS, 2))
    cx = 0.5 * (box[0] + box[2])
    kp[list(BODY_JOINTS)] = np.stack([cx + uv[:, 0] * height, box[1] + uv[:, 1] * height], 1)
    kp += rng.normal(0, jitter, kp.shape)
    vis = np.full(NUM_KEYPOINTS, 0.9)
    vis[list(BODY_JOINTS)[5]] = 0.2  # one wrist hidden
    return box, kp, vis


def run(coder, frames=30, people=3, jitter=1.0):
    """Codes a clip; returns the payloads and checks every decode equals the quantisation."""
    previous: dict[int, SparsePose] = {}
    payloads = []
    for f in range(frames):
        ids = list(range(1, people + 1))
        poses = []
        for tid in ids:
            box, kp, vis = walker(f, 40.0 + 150 * tid, jitter=jitter, seed=tid)
            poses.append(coder.quantize(tid, kp, vis, box))
        data = coder.encode(poses, ids, previous)
        decoded = coder.decode(data, ids, previous)
        assert [p.track_id for p in decoded] == ids
        for mine, theirs in zip(poses, decoded, strict=True):
            assert np.array_equal(mine.q, theirs.q) and np.array_equal(mine.visible, theirs.visible)
        previous = {p.track_id: p for p in decoded}
        payloads.append(data)
    return payloads


def test_round_trip_is_exact_and_within_half_a_step():
    coder = SparsePoseCoder(16)
    box, kp, vis = walker(4, 100.0, jitter=1.0)
    pose = coder.quantize(5, kp, vis, box)
    joints = pose.joints(box)
    assert joints.shape == (13, 2) and joints.dtype == np.float32
    error = np.abs(joints - kp[list(BODY_JOINTS)]).max()
    assert error <= 0.5 * 100.0 / 16 + 1e-4  # half a step of a 100-px box
    assert pose.visible.tolist() == [True] * 5 + [False] + [True] * 7
    run(coder)


def test_poses_follow_their_box():
    """Box-relative: the same pose in a box moved and scaled comes back moved and scaled."""
    coder = SparsePoseCoder()
    box, kp, vis = walker(0, 100.0)
    pose = coder.quantize(1, kp, vis, box)
    moved = box * 2 + np.array([10, 20, 10, 20])
    assert np.allclose(pose.joints(moved), pose.joints(box) * 2 + [10, 20], atol=1e-3)


def test_tracked_people_cost_few_bytes():
    coder = SparsePoseCoder()
    payloads = run(coder, frames=30, people=3, jitter=1.0)
    first, rest = len(payloads[0]), [len(p) for p in payloads[1:]]
    per_person = np.mean(rest) / 3
    assert per_person <= 6.0, per_person  # the aim for level 1
    assert first > np.mean(rest)  # new people are predicted from the template only
    still = run(coder, frames=10, people=3, jitter=0.0)  # a still figure: about a bit a value
    assert np.mean([len(p) for p in still[1:]]) < np.mean(rest)


def test_people_without_a_pose_and_new_people():
    coder = SparsePoseCoder()
    box, kp, vis = walker(0, 100.0)
    one = coder.quantize(2, kp, vis, box)
    data = coder.encode([one], [1, 2, 9], {})
    (back,) = coder.decode(data, [9, 2, 1], {})  # the order of the boxes does not matter
    assert back.track_id == 2 and np.array_equal(back.q, one.q)
    assert coder.decode(coder.encode([], [1, 2], {}), [1, 2], {}) == []
    assert coder.decode(coder.encode([], [], {}), [], {}) == []


def test_far_joints_are_clipped_to_the_reach():
    coder = SparsePoseCoder()
    box, kp, vis = walker(0, 100.0)
    kp[0] = (10_000.0, -10_000.0)
    pose = coder.quantize(1, kp, vis, box)
    assert np.abs(pose.q).max() == MAX_REACH * 16
    (back,) = coder.decode(coder.encode([pose], [1], {}), [1], {})
    assert np.array_equal(back.q, pose.q)


def test_bad_poses_are_refused_when_encoding():
    coder = SparsePoseCoder()
    box, kp, vis = walker(0, 100.0)
    pose = coder.quantize(1, kp, vis, box)
    for bad in (
        lambda: coder.quantize(1, kp[:5], vis[:5], box),  # neither 33 nor 13 joints
        lambda: coder.quantize(1, np.full_like(kp, np.nan), vis, box),
        lambda: coder.quantize(1, kp, vis, np.array([0, 10, 5, 10.5])),  # under 1 px high
        lambda: coder.encode([pose], [2], {}),  # no box of track 1
        lambda: coder.encode([pose, pose], [1], {}),  # twice the same track
        lambda: coder.encode([], list(range(1, MAX_POSES + 2)), {}),
        lambda: coder.encode([SparsePoseCoder(32).quantize(1, kp, vis, box)], [1], {}),
        lambda: SparsePoseCoder(3),
        lambda: SparsePoseCoder(16.5),
    ):
        with pytest.raises(EntropyCodingError):
            bad()


def test_hostile_payloads_are_refused():
    coder = SparsePoseCoder()
    payloads = run(coder, frames=3, people=2)
    data = payloads[0]
    with pytest.raises(EntropyCodingError):  # more boxes than any frame may carry
        coder.decode(data, list(range(1, MAX_POSES + 2)), {})
    with pytest.raises(EntropyCodingError):
        coder.decode(data, [1, 1], {})
    with pytest.raises(EntropyCodingError):  # trailing bytes
        coder.decode(data + b"\x01\x02", [1, 2], {})
    rng = np.random.default_rng(0)
    refused = 0
    for _ in range(300):  # flipped bytes, truncations, garbage: never anything but typed
        kind = rng.integers(3)
        if kind == 0:
            bad = bytearray(data)
            bad[rng.integers(len(bad))] ^= 1 << int(rng.integers(8))
        elif kind == 1:
            bad = data[: rng.integers(len(data))]
        else:
            bad = rng.integers(0, 256, rng.integers(1, 64)).astype(np.uint8).tobytes()
        try:
            out = coder.decode(bytes(bad), [1, 2], {})
        except EntropyCodingError:
            refused += 1
            continue
        for pose in out:  # what decodes is still inside the reach
            assert np.abs(pose.q).max() <= MAX_REACH * 16
    assert refused > 150


def test_a_residual_beyond_the_reach_is_refused():
    """A payload whose residuals put a joint past the reach (the encoder never writes one: it
    clips first), written by hand with the coder's own tables, is refused."""
    from semcodec.codec.entropy.rans import RansWriter
    from semcodec.codec.entropy.sparse_pose import _tables

    coder = SparsePoseCoder()
    at_reach = SparsePose(1, np.full((13, 2), 32, np.int64), np.ones(13, bool), 16)
    previous = {1: at_reach}
    back = coder.decode(coder.encode([at_reach], [1], previous), [1], previous)
    assert back[0].q.max() == 32  # at the reach: fine
    tables = _tables()
    w = RansWriter()
    w.write([1], [0], tables["flag"])
    w.write([8, 8], [0, 0], tables["scale"])
    w.write([1] * 26, [8] * 26, tables["res"])  # one step further out
    w.write([1] * 13, [1] * 13, tables["vis"])
    with pytest.raises(EntropyCodingError, match="beyond"):
        coder.decode(w.getvalue(), [1], previous)
