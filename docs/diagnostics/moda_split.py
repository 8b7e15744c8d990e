"""Where a scaffold setting's MODA goes: misses and false positives of the benchmark's
detector on the decoded frames, per stretch of the clip (issue 51: PETS 501-795 cold gives
more MODA at 0.002 than at 0.004).

    python docs/diagnostics/moda_split.py SEQ START FRAMES SETTING [SETTING ...]

e.g. ``python docs/diagnostics/moda_split.py PETS09-S2L1-full 501 295 level=1,target_bpp=0.002
level=1``; ``CAMERA=zoom=2,x=0.5,y=0.55`` in the environment makes a new camera of the clip
(the benchmark's ``--camera-transform``); ``PROTOCOL=steady`` codes the frames before START
too and measures START on (the benchmark's steady state). Settings that differ only in their
decoder keys decode one stream. Run with ``PYTHONPATH`` at a snapshot to measure another
commit. The detector is the benchmark's, calibrated on the clip's uncompressed frames
(every 2nd) as the benchmark does.
"""

from __future__ import annotations

import dataclasses
import os
import sys

import numpy as np

from semcodec.evaluation.bench.grid import _detector, evaluated_frames
from semcodec.evaluation.codecs.base import Setting
from semcodec.evaluation.codecs.scaffold import ScaffoldCodec
from semcodec.evaluation.data.sequences import load_sequence
from semcodec.evaluation.metrics.detector import calibrate_detector
from semcodec.evaluation.metrics.moda import clear_mod

EVERY = 2
STRETCHES = 6


def main(sequence: str, start: int, count: int, settings: list[str]) -> None:
    camera = os.environ.get("CAMERA")
    options = (("camera_transform", camera),) if camera else ()
    warmup = start - 1 if os.environ.get("PROTOCOL") == "steady" else 0
    coded, info, gt_all = load_sequence(sequence, warmup + count, options, start - warmup)
    pixels = coded[warmup:]
    gt = gt_all.restrict(warmup + 1, warmup + count).renumbered(warmup + 1)
    numbers = evaluated_frames(len(pixels), EVERY)
    config = dataclasses.asdict(calibrate_detector(pixels[::EVERY], gt, numbers)[0])
    detector = _detector(tuple(sorted(config.items())), None)
    edges = np.linspace(0, len(pixels), STRETCHES + 1).astype(int)
    print(f"{sequence} {start}-{start + count - 1} ({warmup} frames before, coded): "
          f"detector {config}")  # fmt: skip
    codec, streams = ScaffoldCodec(), {}
    for text in settings:
        setting = Setting.parse(text)
        stream = str(codec.stream_setting(setting))
        if stream not in streams:
            streams[stream] = codec.encode(coded, setting, info.fps, measured_from=warmup)
        encoded = dataclasses.replace(streams[stream], setting=setting)
        decoded = codec.decode(encoded)[warmup:]
        boxes = {n: detector.detect(decoded[n - 1]).boxes for n in numbers}
        whole = clear_mod(boxes, gt, numbers)
        print(f"{text}: {8 * len(encoded.payload) / pixels[0].size * 3 / len(pixels):.4f} bpp, "
              f"MODA {whole.moda:.3f} (misses {whole.misses}, false positives "
              f"{whole.false_positives} of {whole.gt_objects})")
        for a, b in zip(edges[:-1], edges[1:], strict=True):
            part = [n for n in numbers if a < n <= b]
            r = clear_mod(boxes, gt, part)
            print(f"  frames {a + 1}-{b}: MODA {r.moda:.3f} misses {r.misses} "
                  f"FP {r.false_positives} of {r.gt_objects}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
