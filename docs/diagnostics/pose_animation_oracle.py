"""What the sparse pose and the limb-wise animation can do without compression (issue 39).

On the counted ground-truth people of a range, every ``--every``-th frame, the pose metric's
model (BlazePose full, :mod:`evaluation.metrics.pose_agreement`) on the original is the
answer, and PCK@0.1 of the box height is measured for:

* ``lite``: the edge's pose model (BlazePose lite) on the same box, and ``sparse``: that pose
  quantized as the stream sends it (16 steps a box height): the ceiling of any decoder
  driven by the sparse pose;
* ``still``: the person's original crop ``--lag`` frames earlier (no compression) pasted at
  their box now over the original frame, as ``warp`` draws a reference; ``animated``: the
  same crop moved by :func:`codec.reconstruct.animate.animate_ref` (legs, or with ``--arms``
  every limb) from its sparse pose to the sparse pose now, its uncovered pixels showing the
  frame under it.

Prints the shares and the people the model loses (presence under 0.5) in each pasted frame.

    python docs/diagnostics/pose_animation_oracle.py TUD-Stadtmitte 91 89 --lag 8
"""

import argparse
import os
from pathlib import Path

import numpy as np

from semcodec.codec.core.types import Tracks
from semcodec.codec.entropy.sparse_pose import SparsePoseCoder
from semcodec.codec.reconstruct.animate import LEG_BONES, animate_ref, match_sides
from semcodec.codec.scaffold.appearance import crop_box, draw_ref, ref_size
from semcodec.codec.scaffold.pose import BODY_JOINTS, PoseConfig, PoseEstimator
from semcodec.evaluation.data.sequences import load_sequence
from semcodec.evaluation.metrics.pose_agreement import (
    MIN_PRESENCE,
    MIN_VISIBILITY,
    PoseAgreement,
    joints_agree,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sequence")
    parser.add_argument("start", type=int)
    parser.add_argument("frames", type=int)
    parser.add_argument("--lag", type=int, default=8, help="frames between crop and pose")
    parser.add_argument("--every", type=int, default=4)
    parser.add_argument("--arms", action="store_true")
    args = parser.parse_args()
    root = Path(os.environ.get("SEMCODEC_DATA_DIR", "../shared/data"))
    pix, _, gt = load_sequence(str(root / args.sequence), args.frames, (), args.start)
    judge = PoseAgreement()
    lite = PoseEstimator(PoseConfig("pose_landmark_lite", min_presence=0.0))
    coder, joints = SparsePoseCoder(16), np.array(BODY_JOINTS)

    def boxes(f):
        rows = (gt.frame_numbers == f) & gt.counted
        xywh, ids = gt.boxes[rows], gt.ids[rows]
        keep = xywh[:, 3] >= 8
        xyxy = np.concatenate([xywh[keep, :2], xywh[keep, :2] + xywh[keep, 2:]], 1)
        return dict(zip(ids[keep].tolist(), xyxy, strict=True))

    def sparse(f, box, tid):
        one = Tracks(box[None].astype(np.float32), np.ones(1, np.float32),
                     np.array([tid], np.int32))  # fmt: skip
        found = lite.estimate(pix[f - 1], one)
        if not found or found[0].score < MIN_PRESENCE:
            return None
        pose = coder.quantize(tid, found[0].keypoints, found[0].visibility, box)
        return (pose.q / pose.steps).astype(np.float32), pose.visible, pose.joints(box)

    agree = dict.fromkeys(("lite", "sparse", "still", "animated"), 0)
    lost = dict.fromkeys(("still", "animated"), 0)
    counted = people = 0
    for f in range(1 + args.lag, len(pix) + 1, args.every):
        now, then = boxes(f), boxes(f - args.lag)
        for tid, box in now.items():
            answer = judge.poses(pix[f - 1], box[None])[0]
            a, b = (sparse(f - args.lag, then[tid], tid) if tid in then else None,
                    sparse(f, box, tid))  # fmt: skip
            if answer.score < MIN_PRESENCE or a is None or b is None:
                continue
            shown = answer.visibility[joints] >= MIN_VISIBILITY
            height = box[3] - box[1]
            people, counted = people + 1, counted + int(shown.sum())
            kp = lite.estimate(pix[f - 1], Tracks(box[None].astype(np.float32),
                                                  np.ones(1, np.float32),
                                                  np.array([tid], np.int32)))[0]  # fmt: skip
            agree["lite"] += int((joints_agree(answer.keypoints[joints], kp.keypoints[joints],
                                               height) & shown).sum())  # fmt: skip
            agree["sparse"] += int((joints_agree(answer.keypoints[joints], b[2], height)
                                    & shown).sum())  # fmt: skip
            ref = crop_box(pix[f - args.lag - 1], then[tid], ref_size(then[tid]))
            half = 0.5 * height * ref.shape[1] / ref.shape[0]
            cx = 0.5 * (box[0] + box[2])
            region = np.array([cx - half, box[1], cx + half, box[3]])
            for kind in ("still", "animated"):
                picture, alpha = ref, None
                if kind == "animated":
                    uv, visible = match_sides(a[0], a[1], b[0], b[1])
                    picture, alpha = animate_ref(ref, a[0], a[1], uv, visible, None,
                                                 None if args.arms else LEG_BONES)  # fmt: skip
                canvas = pix[f - 1].astype(np.float32)
                draw_ref(canvas, picture, region, inner=region, ref_alpha=alpha)
                drawn = np.clip(canvas + 0.5, 0, 255).astype(np.uint8)
                got = judge.poses(drawn, box[None])[0]
                if got.score < MIN_PRESENCE:
                    lost[kind] += 1
                    continue
                agree[kind] += int((joints_agree(answer.keypoints[joints], got.keypoints[joints],
                                                 height) & shown).sum())  # fmt: skip
    print(f"{args.sequence} {args.start}+{args.frames} lag {args.lag} arms {args.arms}: "
          f"{people} people, {counted} joints; PCK "
          + ", ".join(f"{k} {v / max(counted, 1):.3f}" for k, v in agree.items())
          + "; lost " + ", ".join(f"{k} {v / max(people, 1):.3f}" for k, v in lost.items()))


if __name__ == "__main__":
    main()
