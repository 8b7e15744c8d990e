"""Where level 1's whole-frame ST-LPIPS goes in steady state: the plate or the people (issue 38).

Usage: ``python docs/diagnostics/steady_plate_split.py ../shared/data/PETS09-S2L1-full 501 295
'scaffold:level=1;x265:qp=51,ipratio=8' [CAMERA_TRANSFORM]`` (one JSON line per setting).

Codes frames 1..start+n-1 (intra period 300, as `--protocol steady`), measures frames
start..start+n-1 every 8th: decoded; decoded with the ground-truth people (box + 15 %)
from the original ("perfect people"); the original with the decoded people ("perfect plate")."""
import json
import sys
import time

import numpy as np

from semcodec.evaluation.codecs.base import Setting, bytes_of_frames
from semcodec.evaluation.codecs.baselines import X265
from semcodec.evaluation.codecs.scaffold import ScaffoldCodec
from semcodec.evaluation.data.sequences import load_sequence
from semcodec.evaluation.metrics.perceptual import st_lpips_per_frame

data, start, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
settings = sys.argv[4].split(";")
ct = sys.argv[5] if len(sys.argv) > 5 else None
opts = (("camera_transform", ct),) if ct else ()
pix, info, gt = load_sequence(data, start + n - 1, opts)
fps = info.fps
t, h, w, _ = pix.shape
warm = start - 1
every = np.arange(warm, t, 8)

def person_mask(frame1):
    m = np.zeros((h, w), bool)
    rows = (gt.frame_numbers == frame1) & gt.counted
    for x, y, bw, bh in gt.boxes[rows]:
        px, py = 0.15 * bw, 0.15 * bh
        y0, y1 = max(0, int(y - py)), min(h, int(y + bh + py))
        m[y0:y1, max(0, int(x - px)) : min(w, int(x + bw + px))] = True
    return m

masks = np.stack([person_mask(i + 1) for i in every])
orig = pix[every]
for text in settings:
    codec_name, s = text.split(":", 1)
    t0 = time.time()
    if codec_name == "scaffold":
        codec = ScaffoldCodec(keyframe_interval=300)
        enc = codec.encode(pix, Setting.parse(s), fps, measured_from=warm)
    else:
        codec = X265(gop=300)
        enc = codec.encode(pix, Setting.parse(s), fps)
    size = sum(bytes_of_frames(enc, warm).values())
    bpp = 8 * size / (w * h * (t - warm))
    dec = codec.decode(enc)[every]
    people = np.where(masks[..., None], orig, dec)
    plate = np.where(masks[..., None], dec, orig)
    full = st_lpips_per_frame(orig, dec).mean()
    pp = st_lpips_per_frame(orig, people).mean()
    pl = st_lpips_per_frame(orig, plate).mean()
    print(json.dumps({"setting": text, "bpp": round(bpp, 6), "st_lpips": round(full, 4),
                      "perfect_people": round(pp, 4), "perfect_plate": round(pl, 4),
                      "person_area": round(float(masks.mean()), 4),
                      "stream_bytes": {k: v for k, v in bytes_of_frames(enc, warm).items()},
                      "seconds": round(time.time() - t0)}), flush=True)
