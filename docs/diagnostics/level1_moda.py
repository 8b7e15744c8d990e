"""Where level 1 loses MODA: the boxes the stream carries, the benchmark's detector (2x2
tiles plus the whole frame, score 0.5) on the original frames and on the decoded ones, every
2nd frame; the share of the carried people found again on the decoded frames, by box height.

    python docs/diagnostics/level1_moda.py PETS09-S2L1-full 651 145 [--camera zoom=2,...]
        [--setting level=1,matte=1] [--oracle-plate] [--out FILE.json]

``--oracle-plate`` draws the people on the original frames' median instead of the decoded
plate. Prints a few lines and, with ``--out``, writes them as JSON. (Issue 22 notes in the
README.)
"""

import argparse
import json
from pathlib import Path

import numpy as np

from semcodec.codec.core.sources import resolve_data_path
from semcodec.codec.reconstruct import create_reconstructor
from semcodec.codec.scaffold.codec import decode_stream
from semcodec.codec.scaffold.detector import DetectorConfig, PersonDetector, box_iou
from semcodec.evaluation.codecs.base import Setting
from semcodec.evaluation.codecs.scaffold import ScaffoldCodec
from semcodec.evaluation.data.sequences import load_sequence
from semcodec.evaluation.metrics.moda import clear_mod

parser = argparse.ArgumentParser()
parser.add_argument("sequence")
parser.add_argument("start", type=int)
parser.add_argument("frames", type=int)
parser.add_argument("--camera", default="none")
parser.add_argument("--setting", default="level=1")
parser.add_argument("--oracle-plate", action="store_true")
parser.add_argument("--out", type=Path, help="also write the figures here (JSON)")
args = parser.parse_args()
options = () if args.camera == "none" else (("camera_transform", args.camera),)
frames, info, gt = load_sequence(str(resolve_data_path(args.sequence, None)), args.frames,
                                 options, args.start)
setting = Setting.parse(args.setting)
codec = ScaffoldCodec()
encoded = codec.encode(frames, setting, info.fps)
name, decoder_options = codec._decoder(setting)  # noqa: SLF001
reconstructor = create_reconstructor(name, **decoder_options)
if args.oracle_plate:
    plate = np.median(frames[::3], axis=0).astype(np.uint8)
    type(reconstructor)._checked_picture = lambda self, frame: plate.copy()  # noqa: SLF001
detector = PersonDetector(DetectorConfig(score_threshold=0.5, tiles=2, include_full_frame=True),
                          threads=1)
every = list(range(2, args.frames + 1, 2))
carried, original, decoded, rows = {}, {}, {}, []
for k, (unit, image) in enumerate(decode_stream(encoded.payload, reconstructor)):
    number = k + 1
    if number not in every:
        continue
    carried[number] = boxes = unit.scaffold.tracks.boxes
    original[number] = found_o = detector.detect(frames[k]).boxes
    decoded[number] = found_d = detector.detect(image).boxes
    truth = gt.boxes_xyxy(number)
    if not len(truth) or not len(boxes):
        continue
    overlap = box_iou(boxes, truth)
    for j in np.flatnonzero(overlap.max(axis=1) >= 0.5):  # carried people who are there
        person = truth[overlap[j].argmax()][None]
        rows.append((len(found_d) and box_iou(person, found_d).max() >= 0.5,
                     len(found_o) and box_iou(person, found_o).max() >= 0.5,
                     boxes[j][3] - boxes[j][1]))  # fmt: skip
rows = np.array(rows, float).reshape(-1, 3)
figures = {"command": vars(args) | {"out": str(args.out)},
           "bpp": 8 * len(encoded.payload) / (args.frames * frames.shape[1] * frames.shape[2]),
           "moda": {label: clear_mod(found, gt, frames=every).moda
                    for label, found in (("carried", carried), ("original", original),
                                         ("decoded", decoded))},
           "found_again": {"decoded": rows[:, 0].mean(), "original": rows[:, 1].mean(),
                           "people": len(rows)},
           "by_height": []}  # fmt: skip
for low, high in ((0, 60), (60, 80), (80, 100), (100, 10_000)):
    pick = (rows[:, 2] >= low) & (rows[:, 2] < high)
    if pick.any():
        figures["by_height"].append({"px": [low, high], "decoded": rows[pick, 0].mean(),
                                     "original": rows[pick, 1].mean(),
                                     "people": int(pick.sum())})  # fmt: skip
print(f"bpp {figures['bpp']:.5f}")
for label, value in figures["moda"].items():
    print(f"MODA, {label}: {value:.3f}")
found = figures["found_again"]
print(f"carried people found again: decoded {found['decoded']:.3f}, original "
      f"{found['original']:.3f} (of {found['people']})")
for row in figures["by_height"]:
    print(f"  boxes {row['px'][0]}-{row['px'][1]} px: decoded {row['decoded']:.3f}, original "
          f"{row['original']:.3f} (of {row['people']})")
if args.out:
    args.out.write_text(json.dumps(figures, indent=1, default=float) + "\n")
