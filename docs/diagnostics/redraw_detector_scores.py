"""Where the redrawer moves MODA: one level-1 stream decoded by the default decoder with and
without its redrawing step, the benchmark's detector (its calibrated config) on every 2nd
decoded frame; MODA of each, and per ground-truth person (by height) the share found at the
config's score and the mean score of the best-overlapping detection (0 where none).

    python docs/diagnostics/redraw_detector_scores.py TUD-Stadtmitte 91 89 \\
        --camera scale=0.5 --target 0.004 --detector RUN/detector/NAME.json \\
        [--redraw FILE] [--data-dir ../shared/data]

``--detector``: the benchmark's calibration file of the same frames (its ``config``); without
it, score 0.5 on 2x2 tiles and the whole frame. ``--redraw``: a redrawer file to compare
with the shipped one as well.
"""

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np

from semcodec.codec.core.sources import resolve_data_path
from semcodec.codec.scaffold.detector import DetectorConfig, PersonDetector, box_iou
from semcodec.evaluation.codecs.base import Setting
from semcodec.evaluation.codecs.scaffold import ScaffoldCodec
from semcodec.evaluation.data.sequences import load_sequence
from semcodec.evaluation.metrics.moda import MATCH_IOU, clear_mod

parser = argparse.ArgumentParser()
parser.add_argument("sequence")
parser.add_argument("start", type=int)
parser.add_argument("frames", type=int)
parser.add_argument("--camera", default="none")
parser.add_argument("--target", default="0.004")
parser.add_argument("--detector", type=Path)
parser.add_argument("--redraw", action="append", default=[])
parser.add_argument("--data-dir")
args = parser.parse_args()
options = () if args.camera == "none" else (("camera_transform", args.camera),)
frames, info, gt = load_sequence(str(resolve_data_path(args.sequence, args.data_dir)),
                                 args.frames, options, args.start)  # fmt: skip
codec = ScaffoldCodec()
base = f"level=1,target_bpp={args.target}"
encoded = codec.encode(frames, Setting.parse(base), info.fps)
print(f"{args.sequence} {args.start}+{args.frames} [{args.camera}] {frames.shape[2]}x"
      f"{frames.shape[1]}: {len(encoded.payload)} bytes, "
      f"{len(encoded.payload) * 8 / (frames.shape[1] * frames.shape[2] * len(frames)):.5f} BPP")
config = (json.loads(args.detector.read_text())["config"] if args.detector
          else {"score_threshold": 0.5, "tiles": 2})  # fmt: skip
threshold = config["score_threshold"]
detector = PersonDetector(DetectorConfig(**{**config, "score_threshold": 0.2}), threads=1)
every = list(range(2, args.frames + 1, 2))
found = {}
for redraw in ["none", "w8", *args.redraw]:
    decoded = codec.decode(dataclasses.replace(
        encoded, setting=Setting.parse(f"{base},redraw={redraw}")))  # fmt: skip
    found[redraw] = {k: detector.detect(decoded[k - 1]) for k in every}
    result = clear_mod({k: d.above(threshold) for k, d in found[redraw].items()}, gt,
                       frames=every)  # fmt: skip
    print(f"redraw={redraw}: MODA {result.moda:.3f}, misses {result.misses}, false positives "
          f"{result.false_positives}, of {result.gt_objects}")
rows = []  # (height, best score under each decoder)
for k in every:
    for truth in gt.boxes_xyxy(k):
        best = []
        for redraw in found:
            boxes, scores = found[redraw][k].boxes, found[redraw][k].scores
            iou = box_iou(truth[None], boxes)[0] if len(boxes) else np.zeros(0)
            best.append(float(scores[iou.argmax()]) if len(iou) and iou.max() >= MATCH_IOU
                        else 0.0)  # fmt: skip
        rows.append((truth[3] - truth[1], *best))
rows = np.asarray(rows)
edges = np.percentile(rows[:, 0], [0, 33, 67, 100])
for lo, hi in zip(edges[:-1], edges[1:], strict=True):
    inside = (rows[:, 0] >= lo) & (rows[:, 0] <= hi)
    found_at = ", ".join(f"{r} {np.mean(rows[inside, i + 1] >= threshold):.3f}/"
                         f"{rows[inside, i + 1].mean():.3f}" for i, r in enumerate(found))
    print(f"people {lo:.0f}-{hi:.0f} px tall ({inside.sum()}): found / mean score: {found_at}")
