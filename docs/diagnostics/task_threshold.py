"""MODA of a task-feature bottleneck's decoded features and of the uncompressed split
detector at several cloud score thresholds, for one window layout (every 2nd frame).

    python docs/diagnostics/task_threshold.py PETS09-S2L1-full 501 295 \
        codec/weights/task/bottleneck-beta0.01.pt --tiles 1 --camera zoom=2,x=0.5,y=0.55 \
        [--out FILE.json]

Detections at a threshold are those of a run at 0.05 with a score at least the threshold
(both NMS steps keep a box or not by higher-scoring boxes only, so this is the run at that
threshold). Prints a line per threshold and, with ``--out``, writes them as JSON. (Issue 22
notes in the README.)
"""

import argparse
import dataclasses
import json
from pathlib import Path

from semcodec.codec.core.sources import resolve_data_path
from semcodec.codec.task.bottleneck import load_bottleneck
from semcodec.codec.task.coder import TaskDecoder, TaskEncoder
from semcodec.codec.task.split import SplitDetector, load_split_model
from semcodec.evaluation.data.sequences import load_sequence
from semcodec.evaluation.metrics.moda import clear_mod

parser = argparse.ArgumentParser()
parser.add_argument("sequence")
parser.add_argument("start", type=int)
parser.add_argument("frames", type=int)
parser.add_argument("bottleneck")
parser.add_argument("--tiles", type=int, default=1)
parser.add_argument("--camera", default="none")
parser.add_argument("--out", type=Path, help="also write the figures here (JSON)")
args = parser.parse_args()
options = () if args.camera == "none" else (("camera_transform", args.camera),)
pixels, info, gt = load_sequence(str(resolve_data_path(args.sequence, None)), args.frames,
                                 options, args.start)
bottleneck = load_bottleneck(args.bottleneck)
split = dataclasses.replace(bottleneck.split, tiles=args.tiles, include_full_frame=False,
                            score_threshold=0.05)
detector = SplitDetector(load_split_model(), split)
height, width = pixels.shape[1:3]
encoder = TaskEncoder(bottleneck, detector, 64, None)
decoder = TaskDecoder(bottleneck, detector, encoder.shape(height, width), height, width)
every = list(range(1, args.frames + 1, 2))
decoded, uncompressed = {}, {}
for i, frame in enumerate(pixels):
    found = decoder.decode(encoder.encode(frame))
    if i + 1 in every:
        decoded[i + 1], uncompressed[i + 1] = found, detector.detect(frame)
figures = {"command": vars(args) | {"out": str(args.out)}, "thresholds": []}
for t in (0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5):
    moda = [clear_mod({k: v.boxes[v.scores >= t] for k, v in found.items()}, gt,
                      frames=every).moda for found in (decoded, uncompressed)]  # fmt: skip
    figures["thresholds"].append({"threshold": t, "decoded": moda[0], "uncompressed": moda[1]})
    print(f"tiles={args.tiles} threshold {t}: decoded {moda[0]:.3f}, uncompressed {moda[1]:.3f}")
if args.out:
    args.out.write_text(json.dumps(figures, indent=1) + "\n")
