"""Detect mode's window layout chosen by agreement, on the start-up frames of a range (issue 40).

For each start frame given, the profile's choice on the first ``PROFILE_SECONDS`` of the
range by the height rule alone (level 1's) and by agreement at detect mode's operating score
(:func:`codec.task.calibrate.choose_layout`), with the profile's description line.
No ground truth is read.

    python docs/diagnostics/layout_by_agreement.py PETS09-S2L1-full 501 601 701 \
        --camera-transform zoom=2,x=0.5,y=0.55
"""

import argparse

import torch

from semcodec.codec.core.sources import resolve_data_path
from semcodec.codec.scaffold.detector import PersonDetector
from semcodec.codec.scaffold.profile import PROFILE_SECONDS, choose_profile
from semcodec.codec.task.calibrate import choose_layout
from semcodec.evaluation.data.sequences import load_sequence

parser = argparse.ArgumentParser()
parser.add_argument("sequence")
parser.add_argument("starts", type=int, nargs="+")
parser.add_argument("--camera-transform", default=None)
args = parser.parse_args()
torch.set_num_threads(2)
options = (("camera_transform", args.camera_transform),) if args.camera_transform else ()
detector = PersonDetector()
for start in args.starts:
    pixels, info, _ = load_sequence(str(resolve_data_path(args.sequence, None)), 200, options,
                                    start)  # fmt: skip
    startup = list(pixels[: max(2, round(PROFILE_SECONDS * info.fps))])
    height = choose_profile(startup, detector)
    agreed = choose_layout(startup, detector)
    print(f"{args.sequence} {start}: height rule {height.tiles}, by agreement {agreed.tiles}: "
          f"{agreed.describe()}", flush=True)
