"""What a plate can give the whole frame (issue 38). Usage: ``python
docs/diagnostics/plate_floor.py ../shared/data/PETS09-S2L1-full 501 295``.

ST-LPIPS floor of a perfect median plate: plate (median of the 70 frames before each
measured one) with the original people pasted, against the original; and the plate coded
by HEVC intra at several sizes (bytes vs ST-LPIPS)."""
import sys

import numpy as np

from semcodec.codec.keyframes import create_intra_coder
from semcodec.evaluation.data.sequences import load_sequence
from semcodec.evaluation.metrics.perceptual import st_lpips_per_frame

data, start, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
pix, info, gt = load_sequence(data, start + n - 1, ())
t, h, w, _ = pix.shape
every = np.arange(start - 1, t, 40)
def mask(f1):
    m = np.zeros((h, w), bool)
    for x, y, bw, bh in gt.boxes[(gt.frame_numbers == f1) & gt.counted]:
        px, py = .15 * bw, .15 * bh
        m[max(0, int(y - py)):int(y + bh + py), max(0, int(x - px)):int(x + bw + px)] = True
    return m
orig = pix[every]
masks = np.stack([mask(i + 1) for i in every])
plate = np.median(pix[start - 71:start - 1:2], axis=0).astype(np.uint8)
def score(p):
    comp = np.where(masks[..., None], orig, p[None])
    return float(st_lpips_per_frame(orig, comp).mean())
print("median plate (uncoded)", round(score(plate), 4), flush=True)
print("frame before range as plate", round(score(pix[start - 2]), 4), flush=True)
for scale in (1.0, 0.5):
    options = {"downscale": scale} if scale != 1.0 else {}
    coder = create_intra_coder("hevc", **options)
    for q in (20, 40, 60, 80):
        data_ = coder.encode(plate, q)
        dec = coder.decode(data_, (w, h))
        print(f"hevc scale {scale} q{q}: {len(data_)} B, {round(score(dec), 4)}", flush=True)
