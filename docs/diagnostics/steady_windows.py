"""What fills level 1's lowest and highest 10-s windows in steady state (issue 38).

Usage: ``python docs/diagnostics/steady_windows.py ../shared/data/PETS09-S2L1-full 501 295
'level=1,target_bpp=0.002' [CAMERA_TRANSFORM]`` (one JSON line).

Codes frames 1..start+n-1 as ``--protocol steady`` does (plate period 300, a live stream),
then over the measured frames prints the sliding 10-s windows' rates against the target
(as the benchmark's ``rate_window_min``/``max``) and, for the lowest and the highest window,
the bytes of each sub-stream in it and the frames where plate pictures (periodic plates,
refreshes) and tiles fell."""
import json
import sys

import numpy as np

from semcodec.codec.scaffold.rate import window_frames
from semcodec.evaluation.codecs.base import Setting
from semcodec.evaluation.codecs.scaffold import ScaffoldCodec
from semcodec.evaluation.data.sequences import load_sequence

data, start, n, setting = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ct = sys.argv[5] if len(sys.argv) > 5 else None
pix, info, _ = load_sequence(data, start + n - 1, (("camera_transform", ct),) if ct else ())
warm = start - 1
t, h, w, _ = pix.shape
codec = ScaffoldCodec(keyframe_interval=300)
enc = codec.encode(pix, Setting.parse(setting), info.fps, measured_from=warm)
per_frame = enc.frame_bytes[warm:]
streams = sorted({k for f in per_frame for k in f})
table = np.array([[f.get(k, 0) for k in streams] for f in per_frame], np.float64)
target = float(Setting.parse(setting).get("target_bpp", 0.004)) * w * h / 8
size = window_frames(info.fps)
sums = np.convolve(table[1:].sum(1), np.ones(size), mode="valid")
ratios = sums / (size * target)


def window(first: int) -> dict:
    rows = table[1 + first:1 + first + size]
    plate = [int(i) for i in np.nonzero(rows[:, streams.index("keyframe")])[0]] \
        if "keyframe" in streams else []  # fmt: skip
    tiles = [int(i) for i in np.nonzero(rows[:, streams.index("plate_tiles")])[0]] \
        if "plate_tiles" in streams else []  # fmt: skip
    return {"first_frame": start + 1 + first, "ratio": round(float(ratios[first]), 3),
            "bytes": {k: int(v) for k, v in zip(streams, rows.sum(0), strict=True)},
            "plate_at": plate, "tiles_at": tiles}


print(json.dumps({"setting": setting, "frame_budget": round(target, 1), "window": size,
                  "bpp": round(8 * table.sum() / (w * h * len(table)), 6),
                  "windows": [round(float(ratios.min()), 3), round(float(ratios.max()), 3)],
                  "lowest": window(int(np.argmin(ratios))),
                  "highest": window(int(np.argmax(ratios))),
                  "ratio_every_second": [round(float(r), 2) for r in ratios[::int(info.fps)]]}))
