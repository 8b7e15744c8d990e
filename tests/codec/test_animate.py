"""``animate`` (issue 39 items 2-3): the memory of each person (evicts at its budget, picks
the nearest pose) and the limb-wise warp of a synthetic figure (its own pose: the identity;
a known pose: the limb moves by the expected amount)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from semcodec.codec.core.types import BodyPose
from semcodec.codec.entropy.sparse_pose import TEMPLATE
from semcodec.codec.reconstruct.animate import (
    SWAPPED_SIDES,
    PersonMemory,
    animate_ref,
    match_sides,
    pose_distance,
    ref_joints,
)

H, W = 96, 64  # a reference of a person 96 px tall (wide: a limb may swing out)
LIMB_RGB = {(3, 5): (255, 0, 0), (9, 11): (0, 0, 255)}  # left forearm red, left shin blue


def figure(uv: np.ndarray) -> np.ndarray:
    """``(H, W, 3)`` uint8: a grey stick figure in pose ``uv`` on a green background, its
    left forearm red and left shin blue."""
    img = np.zeros((H, W, 3), np.uint8)
    img[:] = (40, 160, 40)
    j = np.rint(ref_joints(uv, (W, H))).astype(int)
    cv2.line(img, tuple(j[1]), tuple(j[7]), (128, 128, 128), 9)
    cv2.line(img, tuple(j[2]), tuple(j[8]), (128, 128, 128), 9)
    cv2.circle(img, tuple(j[0]), 6, (128, 128, 128), -1)
    for a, b in ((1, 3), (2, 4), (4, 6), (7, 9), (8, 10), (10, 12), (3, 5), (9, 11)):
        cv2.line(img, tuple(j[a]), tuple(j[b]), LIMB_RGB.get((a, b), (128, 128, 128)), 5)
    return img


def centroid(img: np.ndarray, rgb, alpha: np.ndarray) -> np.ndarray:
    mask = np.all(np.abs(img.astype(int) - rgb) < 60, -1) & (alpha > 0.5)
    ys, xs = np.nonzero(mask)
    return np.array([xs.mean(), ys.mean()])


def pose(uv, age=0, visible=None, tid=1) -> BodyPose:
    uv = np.asarray(uv, np.float32)
    vis = np.ones(13, bool) if visible is None else np.asarray(visible, bool)
    return BodyPose(tid, uv, vis, uv.copy(), age)


def test_pose_distance_known_answers():
    a = TEMPLATE.astype(np.float32)
    vis = np.ones(13, bool)
    assert pose_distance(a, vis, a, vis) == 0.0
    assert pose_distance(a, vis, a + [0.03, -0.04], vis) == pytest.approx(0.05)
    few = np.zeros(13, bool)
    few[:3] = True
    assert pose_distance(a, few, a, vis) == float("inf")  # under 4 joints in common


def test_a_figure_animated_to_its_own_pose_is_the_identity():
    uv = TEMPLATE.astype(np.float32)
    ref = figure(uv)
    out, alpha = animate_ref(ref, uv, np.ones(13, bool), uv, np.ones(13, bool))
    assert np.array_equal(out, ref) and np.all(alpha == 1)
    # the same pose through the warp's arithmetic (one hidden joint in the wanted pose: every
    # part's map is computed): every pixel samples itself
    vis = np.ones(13, bool)
    vis[12] = False
    out, alpha = animate_ref(ref, uv, np.ones(13, bool), uv, vis)
    assert np.abs(out.astype(int) - ref).max() <= 1 and alpha.min() > 0.99


def test_a_limb_moves_by_the_expected_amount():
    uv = TEMPLATE.astype(np.float64)
    ref = figure(uv)
    # the left forearm swung 50 degrees about the elbow, outwards: its middle moves by
    # 2 sin(25 deg) = 0.85 half-lengths
    moved = uv.copy()
    elbow = uv[3]
    length = np.hypot(*(uv[5] - elbow))
    down = (uv[5] - elbow) / length
    c, s = np.cos(np.deg2rad(-50)), np.sin(np.deg2rad(-50))
    moved[5] = elbow + length * np.array([c * down[0] - s * down[1], s * down[0] + c * down[1]])
    out, alpha = animate_ref(ref, uv, np.ones(13, bool), moved, np.ones(13, bool))
    red = LIMB_RGB[(3, 5)]
    before, after = centroid(ref, red, np.ones((H, W))), centroid(out, red, alpha)
    expect = ref_joints(0.5 * (moved[[3]] + moved[[5]]), (W, H))[0]
    assert np.hypot(*(after - expect)) < 2.0  # where the forearm is now, within 2 px
    assert np.hypot(*(after - before)) > 0.8 * 0.85 * 0.5 * length * H
    # where the forearm's end was is not drawn (the plate shows through), the head did not
    # move
    j = np.rint(ref_joints(uv, (W, H))).astype(int)
    x, y = np.rint(ref_joints(uv[[3]] + 0.85 * (uv[[5]] - uv[[3]]), (W, H))[0]).astype(int)
    assert alpha[y, x] == 0 or not np.all(np.abs(out[y, x].astype(int) - red) < 60)
    assert np.array_equal(out[j[0][1] - 3: j[0][1] + 3, j[0][0] - 3: j[0][0] + 3],
                          ref[j[0][1] - 3: j[0][1] + 3, j[0][0] - 3: j[0][0] + 3])  # fmt: skip
    # a turn past MAX_BONE_TURN is taken for the pose model's mistake: the forearm stays
    flipped = uv.copy()
    flipped[5] = elbow - (uv[5] - elbow)
    out2, alpha2 = animate_ref(ref, uv, np.ones(13, bool), flipped, np.ones(13, bool))
    assert np.hypot(*(centroid(out2, red, alpha2) - before)) < 1.0
    # a turn under min_turn is the pose model's jitter: nothing moves
    small, small_alpha = animate_ref(ref, uv, np.ones(13, bool), moved, np.ones(13, bool),
                                     min_turn=np.deg2rad(55))  # fmt: skip
    assert np.array_equal(small, ref) and np.all(small_alpha == 1)
    # the left shin, untouched, stays
    blue = LIMB_RGB[(9, 11)]
    assert np.hypot(*(centroid(out, blue, alpha) - centroid(ref, blue, np.ones((H, W))))) < 0.5


def test_a_pose_labelled_the_other_way_round_is_read_with_its_sides_exchanged():
    uv = TEMPLATE.astype(np.float32).copy()
    uv[[9, 11], 0] += 0.08  # a stride, so that the sides differ
    vis = np.ones(13, bool)
    vis[5] = False
    swapped_uv, swapped_vis = uv[list(SWAPPED_SIDES)], vis[list(SWAPPED_SIDES)]
    got_uv, got_vis = match_sides(uv, vis, swapped_uv, swapped_vis)
    assert np.array_equal(got_uv, uv) and np.array_equal(got_vis, vis)
    got_uv, _ = match_sides(uv, vis, uv + 0.01, vis)
    assert np.array_equal(got_uv, uv + 0.01)


def test_the_memory_picks_the_nearest_pose_and_evicts_the_least_used_at_its_budget():
    one = np.zeros((H, W, 4), np.uint8).nbytes  # 18,432 bytes a reference
    memory = PersonMemory(3.5 * one)
    standing = TEMPLATE.astype(np.float32)
    stride = standing.copy()
    stride[[9, 11], 0] += 0.1
    stride[[10, 12], 0] -= 0.1
    refs = [np.full((H, W, 4), k, np.uint8) for k in range(5)]
    memory.add(1, refs[0], None, pose(standing), 1)
    memory.add(1, refs[1], None, pose(stride), 2)
    memory.add(1, refs[2], None, pose(standing, age=3), 3)  # its pose was not sent with it
    assert memory.nearest(1, pose(stride + 0.01), 4).ref is refs[1]
    assert memory.nearest(1, pose(standing), 5).ref is refs[0]
    assert memory.nearest(1, None, 6).ref is refs[2]  # no pose: the newest
    assert memory.nearest(7, pose(standing), 6) is None
    # a 4th reference is over the budget: the least recently drawn goes (refs[1], drawn on
    # frame 4; refs[0] on 5, refs[2] on 6)
    memory.add(2, refs[3], None, pose(standing), 7)
    assert memory.evicted == 1 and memory.nbytes <= 3.5 * one
    assert [r.ref for r in memory.people[1]] == [refs[0], refs[2]]
    # a budget of 0 keeps each person's newest only
    small = PersonMemory(0)
    for k in range(3):
        small.add(5, refs[k], None, pose(standing), k)
    assert [r.ref for r in small.people[5]] == [refs[2]]
    with pytest.raises(ValueError, match="budget"):
        PersonMemory(-1)


def test_the_animate_decoder_draws_the_remembered_person_in_the_pose_sent():
    """Known answer through the decoder (not only :func:`animate_ref`): a person remembered
    standing and sent with the left shin swung 40 degrees outwards about the knee is drawn
    with the shin where the sent pose puts it; the arms, which ``animate`` leaves alone by
    default, stay. A decoder that drew the remembered picture as it is fails."""
    from types import SimpleNamespace

    from semcodec.codec.reconstruct.animate import AnimateReconstructor

    uv = TEMPLATE.astype(np.float64)
    ref = figure(uv)
    knee, ankle = uv[9], uv[11]
    c, s = np.cos(np.deg2rad(-40)), np.sin(np.deg2rad(-40))  # outwards, clear of the other leg
    shin = ankle - knee
    sent = uv.copy()
    sent[11] = knee + np.array([c * shin[0] - s * shin[1], s * shin[0] + c * shin[1]])
    animator = AnimateReconstructor(memory_mb=1.0, pose_s=0.0)  # the poses as sent
    animator.memory.add(1, ref, None, pose(uv), 1)
    frame = SimpleNamespace(fps=7.0, scaffold=SimpleNamespace(number=2,
                                                              body_poses={1: pose(sent)}))
    animator._smooth_poses(frame)
    out, alpha = animator._person(1, frame)
    alpha = np.ones((H, W)) if alpha is None else alpha
    blue, red = LIMB_RGB[(9, 11)], LIMB_RGB[(3, 5)]
    before, after = centroid(ref, blue, np.ones((H, W))), centroid(out, blue, alpha)
    expect = ref_joints(0.5 * (sent[[9]] + sent[[11]]), (W, H))[0]
    assert np.hypot(*(after - expect)) < 2.0  # where the sent pose puts the shin
    length = np.hypot(*shin) * H
    assert np.hypot(*(after - before)) > 0.8 * np.sin(np.deg2rad(20)) * length  # it moved
    arm = np.hypot(*(centroid(out, red, alpha) - centroid(ref, red, np.ones((H, W)))))
    assert arm < 0.5  # the arms stay (arms=False)


@pytest.mark.shared
def test_animate_decodes_level_1_with_and_without_poses(sample_frames):
    from semcodec.codec.core.models import ModelNotFoundError, resolve_model
    from semcodec.codec.reconstruct import create_reconstructor
    from semcodec.codec.scaffold.codec import decode_stream, encode_frames
    from semcodec.codec.scaffold.levels import level_config

    try:
        resolve_model("pose_landmark_lite")
    except ModelNotFoundError as exc:
        pytest.skip(f"models are not beside the repository: {exc}")
    frames = sample_frames[:8]
    size = frames.shape[2], frames.shape[1]

    def decode(config, name, **options):
        header, units, _ = encode_frames(frames, config, 7, size, len(frames))
        import io

        from semcodec.codec.bitstream import write_stream

        buffer = io.BytesIO()
        write_stream(buffer, header, units)
        out = create_reconstructor(name, **options)
        return [image for _, image in decode_stream(buffer.getvalue(), out)], out

    plain = level_config(1)
    warp, _ = decode(plain, "warp")
    same, _ = decode(plain, "animate")
    assert all(np.array_equal(a, b) for a, b in zip(warp, same, strict=True))  # no pose: warp
    # a rate at which the sample's people get references large enough to animate
    posed = level_config(1, pose_every=1, target_bpp=0.016)
    first, animator = decode(posed, "animate", memory_mb=1.0)
    again, _ = decode(posed, "animate", memory_mb=1.0)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    posed_warp, _ = decode(posed, "warp")  # the same stream: the poses move people's limbs
    assert any(not np.array_equal(a, b) for a, b in zip(first, posed_warp, strict=True))
    assert first[0].shape == frames[0].shape and animator.memory.nbytes <= 1e6
    assert animator.describe()["memory_mb"] == 1.0


def test_the_memory_keeps_the_newest_unless_an_older_pose_is_clearly_nearer():
    from semcodec.codec.reconstruct.animate import CHOICE_MARGIN

    standing = TEMPLATE.astype(np.float32)
    memory = PersonMemory(1e9)
    thumb = np.zeros((H // 4, W // 4, 4), np.uint8)
    old, new = np.zeros((H, W, 4), np.uint8), np.ones((H, W, 4), np.uint8)
    memory.add(1, thumb, None, pose(standing), 1)  # a thumbnail in exactly this pose
    memory.add(1, old, None, pose(standing + 0.5 * CHOICE_MARGIN), 2)
    memory.add(1, new, None, pose(standing + 2.5 * CHOICE_MARGIN), 3)
    # old is nearer by 2 sqrt(2) margins: chosen; the thumbnail, nearer still, is too small
    assert memory.nearest(1, pose(standing), 4).ref is old
    # old nearer by 0.2 sqrt(2) margins only: the newest stays
    assert memory.nearest(1, pose(standing + 1.4 * CHOICE_MARGIN), 5).ref is new
