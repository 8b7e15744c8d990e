"""Person-region and whole-frame ST-LPIPS of scaffold settings on a clip, without MODA: the
quick probe behind issue 51's ceiling and reference-size trials (the benchmark's person crops,
ground-truth boxes grown 1.2x on every 4th frame; the whole frame on every 4th frame).

    python docs/diagnostics/person_region_probe.py SEQ START FRAMES 'SETTING;SETTING...'

e.g. ``python docs/diagnostics/person_region_probe.py ../shared/data/TUD-Stadtmitte 91 89
'level=1;level=1,target_bpp=0.05,appearance_quality=90,appearance_refresh_s=0.1'``, with
``CAMERA=zoom=2,x=0.5,y=0.55`` in the environment for a camera made from the clip (the
benchmark's ``--camera-transform``) and ``PYTHONPATH`` at a snapshot to measure another commit.
Prints one line per setting: BPP from the stream's bytes, person-region and whole-frame
ST-LPIPS (lower is better).
"""

from __future__ import annotations

import os
import sys

import numpy as np

from semcodec.evaluation.codecs.base import Setting
from semcodec.evaluation.codecs.scaffold import ScaffoldCodec
from semcodec.evaluation.data.sequences import load_sequence
from semcodec.evaluation.metrics.perceptual import st_lpips_per_frame
from semcodec.evaluation.metrics.person_region import person_crops

EVERY = 4


def scores(frames: np.ndarray, decoded: np.ndarray, gt) -> tuple[float, float]:
    """``(person-region, whole-frame)`` mean ST-LPIPS of ``decoded`` against ``frames``."""
    numbers = list(range(1, len(frames) + 1, EVERY))
    reference, crops = person_crops(frames, decoded, gt, numbers)
    person = float(st_lpips_per_frame(reference, crops, None, batch_size=16).mean())
    whole = float(st_lpips_per_frame(frames[::EVERY], decoded[::EVERY], None,
                                     batch_size=4).mean())  # fmt: skip
    return person, whole


def load(sequence: str, start: int, count: int):
    """``(frames (T, H, W, 3) uint8, info, ground truth)`` of the clip, through ``CAMERA``."""
    camera = os.environ.get("CAMERA")
    options = (("camera_transform", camera),) if camera else ()
    pixels, info, gt = load_sequence(sequence, count, options, start)
    return np.stack(pixels), info, gt


def main(sequence: str, start: int, count: int, settings: str) -> None:
    frames, info, gt = load(sequence, start, count)
    for text in settings.split(";"):
        codec = ScaffoldCodec()
        encoded = codec.encode(frames, Setting.parse(text), info.fps)
        person, whole = scores(frames, codec.decode(encoded), gt)
        bpp = 8 * len(encoded.payload) / frames[..., 0].size
        print(f"{text}: bpp {bpp:.5f} person {person:.4f} whole {whole:.4f}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
