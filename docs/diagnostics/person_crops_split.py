"""Where a scaffold setting loses person-region quality against x265: the benchmark's person
crops (ground-truth boxes grown 1.2x, every 4th frame, ST-LPIPS), split into crops that touch
the frame's border and crops inside it, beside x265 on the same frames, with the worst crops
listed (issue 51: which people the cloud draws worse than x265, and why).

    python docs/diagnostics/person_crops_split.py SEQ START FRAMES SCAFFOLD_SETTING X265_SETTING

e.g. ``python docs/diagnostics/person_crops_split.py ../shared/data/PETS09-S2L1-full 501 60
level=1 crf=51`` with ``CAMERA=zoom=2,x=0.5,y=0.55`` in the environment for a new camera made
from the clip (the benchmark's ``--camera-transform``). Run with ``PYTHONPATH`` at a snapshot to
measure another commit.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from semcodec.evaluation.codecs.base import Setting
from semcodec.evaluation.codecs.baselines import X265
from semcodec.evaluation.codecs.scaffold import ScaffoldCodec
from semcodec.evaluation.data.sequences import load_sequence
from semcodec.evaluation.metrics.perceptual import st_lpips_per_frame
from semcodec.evaluation.metrics.person_region import crop_windows, person_crops

EVERY = 4
WORST = 12


def _decoded(codec, frames: np.ndarray, setting: str, fps: float) -> tuple[np.ndarray, float]:
    encoded = codec.encode(frames, Setting.parse(setting), fps)
    bpp = 8 * len(encoded.payload) / (frames.shape[0] * frames.shape[1] * frames.shape[2])
    return codec.decode(encoded), bpp


def main(sequence: str, start: int, count: int, scaffold: str, x265: str) -> None:
    camera = os.environ.get("CAMERA")
    options = (("camera_transform", camera),) if camera else ()
    pixels, info, gt = load_sequence(sequence, count, options, start)
    frames = np.stack(pixels)
    height, width = frames.shape[1:3]
    numbers = list(range(1, len(frames) + 1, EVERY))
    windows = [(n, w) for n in numbers for w in crop_windows(gt, n, width, height)]
    border = np.array([w[0] <= 1 or w[1] <= 1 or w[2] >= width - 1 or w[3] >= height - 1
                       for _, w in windows], bool)  # fmt: skip
    scores = {}
    for name, codec, setting in (("scaffold", ScaffoldCodec(), scaffold), ("x265", X265(), x265)):
        decoded, bpp = _decoded(codec, frames, setting, info.fps)
        reference, crops = person_crops(frames, decoded, gt, numbers)
        scores[name] = st_lpips_per_frame(reference, crops, None, batch_size=16)
        print(f"{name} {setting}: {bpp:.4f} bpp, person-region ST-LPIPS "
              f"{scores[name].mean():.4f} over {len(windows)} crops")
    for label, rows in (("touching the border", border), ("inside the frame", ~border)):
        if rows.any():
            ours, theirs = scores["scaffold"][rows].mean(), scores["x265"][rows].mean()
            print(f"  {label}: {int(rows.sum())} crops, scaffold {ours:.4f}, x265 {theirs:.4f}")
    print(f"  the {WORST} worst crops for the scaffold (frame, window, scaffold, x265):")
    for k in np.argsort(-scores["scaffold"])[:WORST]:
        number, window = windows[k]
        print(f"    {number} {window} {scores['scaffold'][k]:.3f} {scores['x265'][k]:.3f}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
