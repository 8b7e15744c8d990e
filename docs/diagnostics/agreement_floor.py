"""MODA against agreement, to choose detect mode's ``--min-agreement`` (issue 40).

On a range the shipped bottlenecks were trained on, as the edge would code it: the camera's
windows chosen on its start-up frames (:func:`codec.scaffold.profile.choose_profile`), the
cloud threshold of each bottleneck calibrated there (``match_threshold``), then every frame
coded by each shipped bottleneck at several skip thresholds (intra unit every 64 frames) and
decoded. For each (β, skip): the agreement (F1 at IoU 0.5 of the decoded detections against
the uncompressed split detector's at 0.4, the edge's self-check measure) over the evaluated
frames, and the MODA of the decoded detections and of the uncompressed split detector against
the ground truth. Prints one line per setting and writes the rows as JSON.

    python docs/diagnostics/agreement_floor.py TUD-Stadtmitte 1 90 --out FILE.json
    python docs/diagnostics/agreement_floor.py PETS09-S2L1-full 1 200 --out FILE.json
"""

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np
import torch

from semcodec.codec.core.sources import resolve_data_path
from semcodec.codec.scaffold.detector import PersonDetector
from semcodec.codec.scaffold.profile import PROFILE_SECONDS, choose_profile, profile_frame_indices
from semcodec.codec.task.calibrate import REFERENCE_THRESHOLD, DetectProfile, match_threshold
from semcodec.codec.task.coder import TaskEncoder, stack_latents, unstack_latents
from semcodec.codec.task.ratecontrol import agreement_counts, f1
from semcodec.codec.task.split import SplitDetector, load_split_model
from semcodec.codec.task.stream import shipped_candidates
from semcodec.evaluation.data.sequences import load_sequence
from semcodec.evaluation.metrics.moda import clear_mod

parser = argparse.ArgumentParser()
parser.add_argument("sequence")
parser.add_argument("start", type=int)
parser.add_argument("frames", type=int)
parser.add_argument("--skips", type=int, nargs="+", default=[0, 4, 12, 24])
parser.add_argument("--every", type=int, default=2, help="evaluate every k-th frame")
parser.add_argument("--out", type=Path, required=True)
args = parser.parse_args()
torch.set_num_threads(2)
pixels, info, gt = load_sequence(str(resolve_data_path(args.sequence, None)), args.frames, (),
                                 args.start)
height, width = pixels.shape[1:3]
startup = list(pixels[: max(2, round(PROFILE_SECONDS * info.fps))])
camera = choose_profile(startup, PersonDetector())
model = load_split_model()
bottlenecks = shipped_candidates()
base = next(iter(bottlenecks.values())).split
split = dataclasses.replace(DetectProfile(camera, 0.0).split(base), score_threshold=0.0)
detector = SplitDetector(model, split)
features = [detector.edge_features(f) for f in pixels]
every = list(range(0, len(pixels), args.every))
reference = {i: detector.cloud_detect(features[i], height, width) for i in every}
kept = {i: d.boxes[d.scores >= REFERENCE_THRESHOLD] for i, d in reference.items()}
moda_raw = clear_mod({i + 1: b for i, b in kept.items()}, gt, frames=[i + 1 for i in every]).moda
checks = profile_frame_indices(len(startup))
ref_start = {i: detector.cloud_detect(features[i], height, width) for i in checks}
rows = []
for beta, bottleneck in bottlenecks.items():
    q = [bottleneck.model.quantize(f) for f in features]
    with torch.inference_mode():
        start = {i: detector.cloud_detect(bottleneck.model.reconstruct(q[i]), height, width)
                 for i in checks}
    threshold = match_threshold([ref_start[i].scores for i in checks],
                                [start[i].scores for i in checks])[0]
    for skip in args.skips:
        encoder = TaskEncoder(bottleneck, detector, 64, skip)
        shape = encoder.shape(height, width)
        found, counts = {}, []
        for i, latents in enumerate(q):
            encoder.encode_latents(stack_latents(latents))
            if i in reference:
                with torch.inference_mode():
                    got = detector.cloud_detect(bottleneck.model.reconstruct(
                        unstack_latents(encoder.decoded, shape)), height, width)
                boxes = got.boxes[got.scores >= threshold]
                found[i + 1] = boxes
                counts.append(agreement_counts(kept[i], boxes))
        moda = clear_mod(found, gt, frames=sorted(found)).moda
        row = {"sequence": args.sequence, "start": args.start, "frames": args.frames,
               "tiles": camera.tiles, "beta": beta, "skip": skip, "threshold": threshold,
               "agreement": f1(counts), "moda": moda, "moda_uncompressed_split": moda_raw}
        rows.append(row)
        print(f"beta {beta:g} skip {skip}: agreement {row['agreement']:.3f} MODA {moda:.3f} "
              f"(uncompressed split {moda_raw:.3f}, threshold {threshold:.2f})", flush=True)
args.out.write_text(json.dumps({"command": vars(args) | {"out": str(args.out)},
                                "rows": rows}, indent=1) + "\n")
print("mean agreement", np.mean([r["agreement"] for r in rows]))
