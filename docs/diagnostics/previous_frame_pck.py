"""The pose metric's yardstick: PCK@0.1 of a perfect decoder one frame late (issue 54).

Scores the original's previous frame against each frame with the benchmark's pose metric
(:mod:`evaluation.metrics.pose_agreement`: BlazePose full on each counted ground-truth box,
PCK@0.1 of the box height over the 13 body joints), on the frames the benchmark scores with
``--metrics pose --lpips-every N`` (1, 1+N, ...; frame 1 has no previous frame and is left
out). The model's own jitter and one frame of motion both count, so it is what issue 54's
PCK line compares a decoder with.

    python docs/diagnostics/previous_frame_pck.py TUD-Stadtmitte 91 89 --every 4
    python docs/diagnostics/previous_frame_pck.py PETS09-S2L1-full 501 295 --every 4 \\
        --camera zoom=2,x=0.5,y=0.55
"""

import argparse

import numpy as np

from semcodec.codec.core.sources import resolve_data_path
from semcodec.evaluation.data.sequences import load_sequence
from semcodec.evaluation.metrics.pose_agreement import PoseAgreement


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="sequence name or folder")
    parser.add_argument("start", type=int, help="first frame (1-based)")
    parser.add_argument("frames", type=int, help="number of frames")
    parser.add_argument("--every", type=int, default=4, help="score every n-th frame")
    parser.add_argument("--camera", help="a camera transform (zoom=2,x=0.5,y=0.55, scale=0.5)")
    parser.add_argument("--data-dir", help="where sequence names are looked up")
    args = parser.parse_args()
    options = () if args.camera is None else (("camera_transform", args.camera),)
    pixels, _, gt = load_sequence(str(resolve_data_path(args.data, args.data_dir)), args.frames,
                                  options, args.start)  # fmt: skip
    frames = np.stack(pixels)
    late = np.concatenate([frames[:1], frames[:-1]])
    numbers = range(1 + args.every, len(frames) + 1, args.every)
    scores = PoseAgreement().scores(frames, late, gt, numbers)
    print(f"{args.data} {args.start}+{args.frames} [{args.camera or 'as filmed'}] "
          f"every {args.every}: previous frame's pose_pck {scores['pose_pck']:.4f}, "
          f"people {scores['pose_people']}, lost {scores['pose_lost']}")


if __name__ == "__main__":
    main()
