"""Zoomed PETS: is detect mode's shortfall the window layout or the cloud threshold? (issue 40)

On a range of a sequence (optionally through ``--camera-transform``), for a forced window
layout (``--tiles``) and one shipped bottleneck (``--beta``): the cloud threshold chosen as the
edge does (mean count on the start-up frames matched to the uncompressed split detector's at
0.4), then every frame coded at skip 0 (intra unit every 64) and decoded; MODA of the decoded
features and of the uncompressed split detector at thresholds 0.2-0.6 and at the calibrated
one, against the ground truth on every ``--every``-th frame. Prints one line per threshold.

    python docs/diagnostics/zoom_layout_threshold.py PETS09-S2L1-full 501 150 \
        --camera-transform zoom=2,x=0.5,y=0.55 --tiles 1 --beta 0.003
"""

import argparse
import dataclasses

import torch

from semcodec.codec.core.sources import resolve_data_path
from semcodec.codec.scaffold.detector import PersonDetector
from semcodec.codec.scaffold.profile import PROFILE_SECONDS, choose_profile, profile_frame_indices
from semcodec.codec.task.calibrate import REFERENCE_THRESHOLD, DetectProfile, match_threshold
from semcodec.codec.task.coder import TaskEncoder, stack_latents, unstack_latents
from semcodec.codec.task.split import SplitDetector, load_split_model
from semcodec.codec.task.stream import shipped_candidates
from semcodec.evaluation.data.sequences import load_sequence
from semcodec.evaluation.metrics.moda import clear_mod

parser = argparse.ArgumentParser()
parser.add_argument("sequence")
parser.add_argument("start", type=int)
parser.add_argument("frames", type=int)
parser.add_argument("--camera-transform", default=None)
parser.add_argument("--tiles", type=int, required=True)
parser.add_argument("--beta", type=float, required=True)
parser.add_argument("--every", type=int, default=2)
args = parser.parse_args()
torch.set_num_threads(2)
options = (("camera_transform", args.camera_transform),) if args.camera_transform else ()
pixels, info, gt = load_sequence(str(resolve_data_path(args.sequence, None)), args.frames,
                                 options, args.start)
height, width = pixels.shape[1:3]
startup = list(pixels[: max(2, round(PROFILE_SECONDS * info.fps))])
camera = choose_profile(startup, PersonDetector())
print("profile chose", camera.describe(), "; forced tiles", args.tiles, flush=True)
camera = dataclasses.replace(camera, tiles=args.tiles)
model = load_split_model()
bottleneck = shipped_candidates()[args.beta]
split = dataclasses.replace(DetectProfile(camera, 0.0).split(bottleneck.split),
                            score_threshold=0.0)
detector = SplitDetector(model, split)
features = [detector.edge_features(f) for f in pixels]
every = set(range(0, len(pixels), args.every))
reference = {i: detector.cloud_detect(features[i], height, width) for i in sorted(every)}
checks = profile_frame_indices(len(startup))
q = [bottleneck.model.quantize(f) for f in features]
with torch.inference_mode():
    start = {i: detector.cloud_detect(bottleneck.model.reconstruct(q[i]), height, width)
             for i in checks}
ref_start = {i: detector.cloud_detect(features[i], height, width) for i in checks}
calibrated, target, matched = match_threshold([ref_start[i].scores for i in checks],
                                              [start[i].scores for i in checks])
encoder = TaskEncoder(bottleneck, detector, 64, 0)
shape = encoder.shape(height, width)
decoded = {}
for i, latents in enumerate(q):
    encoder.encode_latents(stack_latents(latents))
    if i in every:
        with torch.inference_mode():
            decoded[i] = detector.cloud_detect(bottleneck.model.reconstruct(
                unstack_latents(encoder.decoded, shape)), height, width)


def moda(dets, t):
    found = {i + 1: d.boxes[d.scores >= t] for i, d in dets.items()}
    return clear_mod(found, gt, frames=sorted(found)).moda


print(f"calibrated {calibrated:.2f} (count {matched:.2f} vs {target:.2f} at "
      f"{REFERENCE_THRESHOLD}): decoded MODA {moda(decoded, calibrated):.3f}", flush=True)
for t in (0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6):
    print(f"threshold {t:.2f}: uncompressed split MODA {moda(reference, t):.3f}, "
          f"decoded MODA {moda(decoded, t):.3f}", flush=True)
